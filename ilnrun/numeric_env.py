"""The native numeric libraries under the numbers: what they are and how many threads they run.

A cell's numbers are bit-identical within one machine and software stack; on another CPU, BLAS
kernel or library version they may differ in the last digits (a BLAS kernel sums in another
order), and with more than one BLAS thread a large matrix product is split and summed in
another order too. Hence two things, in one place:

- :func:`one_thread`: a context in which every native thread pool (BLAS, OpenMP) runs one
  thread. ``ilnrun run`` runs every cell in it (:mod:`ilnrun.engines.local`), and
  :func:`ilnrun.load`'s rebuilt cells and their estimators run in it as well, so that a cell
  reproduced from a Python session is the command line's, whatever threads the session allows.
- :func:`collect`: the numeric environment recorded in ``meta.json`` (``numeric_environment``):
  the CPU model, the BLAS libraries numpy and scipy load (library, version, kernel), numpy's SIMD
  extensions (baseline, found, not found: what ``numpy.show_runtime()`` prints) and the
  versions of numpy, scipy, numba, llvmlite, scikit-learn, jax and jaxlib (``None`` when not
  installed; read from the package metadata, nothing is imported for it). :func:`changes`
  names what differs between two such records, ``old -> new``; :func:`update_history` keeps
  ``meta.json``'s ``numeric_environments`` (the environments a directory's cells were computed
  under) and :func:`computed_under` reads it for the report.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "PACKAGES",
    "blas_threads",
    "changes",
    "collect",
    "computed_under",
    "cpu_model",
    "one_thread",
    "summary",
    "update_history",
]

# packages whose version can change a number (jax's only on the jax engine)
PACKAGES = ("numpy", "scipy", "numba", "llvmlite", "scikit-learn", "jax", "jaxlib")

_CONTROLLER: tuple[tuple[int, int], Any] | None = None
MAX_CHANGES = 40  # changes() lists at most this many (a hand-edited meta.json may hold more)


def _controller() -> Any:
    """threadpoolctl's controller of the native libraries loaded in this process.

    Listing them costs ~10 ms, so the list is kept and made again only when the process has
    imported new modules since (which is when new libraries can appear)."""
    global _CONTROLLER
    state = (os.getpid(), len(sys.modules))
    if _CONTROLLER is None or _CONTROLLER[0] != state:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = (state, ThreadpoolController())
    return _CONTROLLER[1]


# the thread-count variables native libraries read when they load (OpenBLAS, OpenMP runtimes,
# MKL, BLIS, Accelerate): set to 1 within :func:`one_thread` for a library first loaded there
THREAD_VARIABLES = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
# the native libraries a cell's numbers go through, loaded before the pin: numpy's BLAS and
# scipy's (numba's compiled np.dot and scipy.linalg call the latter)
CELL_LIBRARIES = ("numpy", "scipy.linalg.cython_blas")


@contextmanager
def one_thread() -> Iterator[None]:
    """A context in which every native thread pool (BLAS, OpenMP) runs one thread: what
    ``ilnrun run`` pins for every cell (entering it costs ~0.1 ms once the libraries are
    listed).

    threadpoolctl pins the libraries loaded when it is entered, so the libraries of
    :data:`CELL_LIBRARIES` are loaded first (scipy's BLAS is otherwise loaded by the first
    compiled pass, inside the pin: a dot product of more than 10 000 numbers was then split over
    two threads and summed in another order). A library first loaded inside the context (an
    OpenMP runtime that scikit-learn brings) reads :data:`THREAD_VARIABLES`, set to 1 there and
    put back on leaving."""
    for name in CELL_LIBRARIES:
        if name not in sys.modules:
            with suppress(ImportError):
                importlib.import_module(name)
    saved = {k: os.environ.get(k) for k in THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    try:
        with _controller().limit(limits=1):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def blas_threads() -> int | None:
    """The most threads a loaded BLAS library runs now (``None`` when none is loaded)."""
    counts = [
        int(lib.num_threads) for lib in _controller().lib_controllers if lib.user_api == "blas"
    ]
    return max(counts) if counts else None


def cpu_model() -> str:
    """``model name`` of ``/proc/cpuinfo`` (Linux), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _owner(filepath: str) -> str | None:
    """The package that ships a native library, from its folder (``numpy.libs``,
    ``scipy/.dylibs``); ``None`` for a system library."""
    p = Path(filepath)
    folder = p.parent.parent.name if p.parent.name == ".dylibs" else p.parent.name
    if p.parent.name == ".dylibs" or folder.endswith(".libs"):
        return folder.removesuffix(".libs")
    return None


def _blas() -> list[dict]:
    """The BLAS libraries numpy and scipy load: which package ships each, the implementation
    (``openblas``, ``mkl``, ...), its version, the kernel it chose for this CPU
    (``architecture``, e.g. ``Haswell``, ``SkylakeX``) and the library's file name."""
    with suppress(ImportError):
        import scipy.linalg  # noqa: F401 - loads scipy's BLAS, so that it is listed every time
    out = [
        {
            "used_by": _owner(lib.filepath),
            "internal_api": lib.internal_api,
            "version": lib.version,
            "architecture": getattr(lib, "architecture", None),
            "library": Path(lib.filepath).name,
        }
        for lib in _controller().lib_controllers
        if lib.user_api == "blas"
    ]
    return sorted(out, key=lambda b: (str(b["used_by"]), b["library"]))


def _simd() -> dict[str, list[str]] | None:
    """numpy's SIMD extensions as ``numpy.show_runtime()`` reports them: the ``baseline`` it
    was built for, and the dispatched extensions this CPU has (``found``) or lacks."""
    try:
        from numpy._core import _multiarray_umath as mu  # numpy 2
    except ImportError:
        try:
            from numpy.core import _multiarray_umath as mu  # numpy 1
        except ImportError:
            return None
    features = getattr(mu, "__cpu_features__", {})
    dispatch = list(getattr(mu, "__cpu_dispatch__", []))
    return {
        "baseline": list(getattr(mu, "__cpu_baseline__", [])),
        "found": [f for f in dispatch if features.get(f)],
        "not_found": [f for f in dispatch if not features.get(f)],
    }


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def collect() -> dict:
    """The numeric environment of this process (module docstring); cheap (~10 ms once numpy
    and scipy are imported), imports no jax."""
    return {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "blas": _blas(),
        "numpy_simd": _simd(),
        "versions": {pkg: _version(pkg) for pkg in PACKAGES},
    }


def _flat(env: Any) -> dict[str, Any]:
    """A record as ``{dotted key: value}``; a BLAS library is keyed by the package that ships
    it (``blas[numpy].architecture``)."""
    out: dict[str, Any] = {}
    if not isinstance(env, Mapping):
        return out
    for key, value in env.items():
        if key == "blas" and isinstance(value, list):
            for i, lib in enumerate(value):
                if isinstance(lib, Mapping):
                    name = lib.get("used_by") or lib.get("library") or i
                    for k, v in lib.items():
                        if k != "used_by":
                            out[f"blas[{name}].{k}"] = v
        elif isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in _flat(value).items()})
        else:
            out[str(key)] = value
    return out


def _show(v: Any, width: int = 60) -> str:
    text = "—" if v is None else str(v)
    return text if len(text) <= width else text[: width - 1] + "…"


def changes(old: Any, new: Any) -> list[str]:
    """What differs between two records of :func:`collect`, one ``key: old -> new`` each
    (a list of SIMD extensions as the extensions added and removed); empty when equal."""
    a, b = _flat(old), _flat(new)
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if isinstance(x, list) and isinstance(y, list):
            diff = [f"+{f}" for f in y if f not in x] + [f"-{f}" for f in x if f not in y]
            out.append(f"{_show(key)}: {_show(' '.join(diff) or f'{x} -> {y}')}")
        else:
            out.append(f"{_show(key)}: {_show(x)} -> {_show(y)}")
    if len(out) > MAX_CHANGES:
        out = [*out[:MAX_CHANGES], f"… and {len(out) - MAX_CHANGES} more"]
    return out


def summary(env: Any) -> str:
    """One line naming a record: CPU, each BLAS library's implementation, version and kernel,
    numpy's version."""
    if not isinstance(env, Mapping):
        return "not recorded"
    blas = env.get("blas") if isinstance(env.get("blas"), list) else []
    libs = [
        " ".join(_show(lib.get(k), 24) for k in ("internal_api", "version", "architecture"))
        + f" ({_show(lib.get('used_by') or lib.get('library'), 24)})"
        for lib in blas[:4]
        if isinstance(lib, Mapping)
    ]
    versions = env.get("versions") if isinstance(env.get("versions"), Mapping) else {}
    return (
        f"CPU {_show(env.get('cpu'))}, BLAS {', '.join(libs) or '—'}, "
        f"numpy {_show(versions.get('numpy'), 24)}"
    )


# -- the environments of a results directory (meta.json ``numeric_environments``) -------------


def _entries(history: Any) -> list[dict]:
    """The well-formed entries of a stored history (anything else is dropped)."""
    if not isinstance(history, list):
        return []
    return [
        e
        for e in history
        if isinstance(e, Mapping)
        and type(e.get("cells_done_before")) is int
        and (e.get("environment") is None or isinstance(e.get("environment"), Mapping))
    ]


def update_history(old_meta: Any, env: dict, start: str, done: int) -> tuple[list[dict], list[str]]:
    """The numeric environments of a results directory after a run starts there, and what
    changed since the environment that computed its finished cells (``[]``: nothing).

    ``meta.json``'s ``numeric_environments`` lists, oldest first, each environment a run of the
    directory started under: ``{"since": its first run's start, "cells_done_before": finished
    cells the directory held then, "environment": the record of :func:`collect`}`` (``None``:
    not recorded, a directory written by an earlier ilnrun). A run under the environment of the
    last entry adds nothing; an entry under which no kept cell was computed
    (``cells_done_before >= done``) is replaced. ``old_meta`` is the earlier ``meta.json``
    (``None`` for a new directory), ``done`` the finished cells the run keeps."""
    old = old_meta if isinstance(old_meta, Mapping) else {}
    history = _entries(old.get("numeric_environments"))
    if not history and done > 0:  # finished cells of an ilnrun that recorded no environment
        since = old.get("first_start", old.get("start"))
        history = [{"since": since, "cells_done_before": 0, "environment": None}]
    while history and history[-1]["cells_done_before"] >= done:
        history.pop()
    changed: list[str] = []
    if history and history[-1]["environment"] != env:
        before = history[-1]["environment"]
        changed = (
            changes(before, env) if before is not None else ["not recorded -> " + summary(env)]
        )
    if not history or changed:
        history.append({"since": start, "cells_done_before": done, "environment": env})
    return history, changed


def computed_under(history: Any, cells: int) -> list[tuple[dict, int]]:
    """``(entry, cells computed under it)`` for each environment of a stored history under
    which cells of the ``cells`` finished ones were computed (by ``cells_done_before``: the
    cells finished between an entry and the next; approximate after ``--extend`` dropped
    cells)."""
    entries = _entries(history)
    if not entries:
        return []
    bounds = [e["cells_done_before"] for e in entries[1:]] + [cells]
    return [
        (e, end - e["cells_done_before"])
        for e, end in zip(entries, bounds, strict=True)
        if end > e["cells_done_before"]
    ]
