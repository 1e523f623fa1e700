"""Threads of one cell: the resource knob ``ilnrun run --threads N`` (environment variable
``ILNRUN_THREADS``), and the CPUs this process may use.

A learner whose pass can split a round's work over threads with the same numbers for any count
(Shrinking Gradient's compiled pass: draws in the stream's order, then search, gather and sum
in fixed-size chunks added in chunk order; docs/algorithms.md §1.9) reads
:func:`threads_per_cell`. It changes no number, so it is not a config key (like ``--jobs``).
Default: one thread per cell.

The count is capped to the CPUs this process may run on (:func:`usable_cpus`): more threads than
CPUs only add switching, and the loky workers of ``--jobs`` get the count as their
``NUMBA_NUM_THREADS`` / ``OMP_NUM_THREADS`` (joblib's ``inner_max_num_threads``), where thousands
of threads ended a worker. ``ilnrun run`` notes the cap (:func:`requested_threads` is what was
asked) and refuses an ``ILNRUN_THREADS`` that is not a whole number >= 1 in ASCII digits.

The processes of ``--jobs`` are the ``--backend``'s (:func:`resolve_backend`; ``auto`` forks
them where a cell runs one thread), run by :mod:`ilnrun.engines.local`.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

THREADS_ENV = "ILNRUN_THREADS"
MAX_DIGITS = 9  # longer values are refused before int() (which also reads non-ASCII digits)
_NOTED: set[str] = set()


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask; ``--jobs`` and ``--threads`` are capped
    to them)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def requested_threads() -> int:
    """``ILNRUN_THREADS`` as asked (default 1), not capped; raises ``ValueError`` naming the
    variable for a value that is not a whole number >= 1 written in ASCII digits (``int()``
    alone would also take ``'２'`` or ``'1_0'``)."""
    raw = os.environ.get(THREADS_ENV, "")
    if not raw.strip(" \t"):
        return 1
    try:
        return whole_number(raw)
    except ValueError as exc:
        raise ValueError(f"{THREADS_ENV}={exc}; unset it or give --threads N") from None


def whole_number(raw: str, long: str = "refused") -> int:
    """``raw`` (spaces or tabs around it allowed) as a whole number >= 1 written in ASCII digits,
    else ``ValueError`` showing the value (``int()`` alone also takes ``'２'``, ``'+2'`` or
    ``'1_0'``). A number of more than :data:`MAX_DIGITS` digits is ``refused`` too, or read as
    the largest of :data:`MAX_DIGITS` digits (``long="capped"``: a count capped to the CPUs
    anyway). ``ILNRUN_THREADS``, ``--threads`` and ``--jobs`` are read with it."""
    text = raw.strip(" \t")
    long_ok = long == "capped" or len(text) <= MAX_DIGITS
    if not (text.isascii() and text.isdigit() and long_ok and text.strip("0")):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise ValueError(f"{shown!r} is not a whole number >= 1 (ASCII digits)")
    return int(text) if len(text) <= MAX_DIGITS else 10**MAX_DIGITS - 1


def threads_per_cell() -> int:
    """The threads of one cell: ``ILNRUN_THREADS`` (default 1) capped to :func:`usable_cpus`;
    a bad value is reported once on stderr and read as 1 (``ilnrun run`` refuses it first)."""
    try:
        n = requested_threads()
    except ValueError as exc:
        msg = f"{exc}: one thread per cell"
        if msg not in _NOTED:
            _NOTED.add(msg)
            print(f"note: {msg}", file=sys.stderr)
        return 1
    return min(n, usable_cpus())


def set_threads_per_cell(threads: int) -> None:
    """Set the knob for this process and the workers it starts afterwards (a count beyond
    :data:`MAX_DIGITS` digits is stored as the largest one: it is capped to the CPUs anyway)."""
    os.environ[THREADS_ENV] = str(min(int(threads), 10**MAX_DIGITS - 1))


# ``--backend``: ``auto`` (the default) is resolved to ``fork`` or ``loky`` (resolve_backend)
BACKENDS = ("auto", "fork", "loky", "dask")


@contextmanager
def forking() -> Iterator[None]:
    """Around a fork of this process: the standard streams flushed first (a child would write
    what is still buffered a second time), and the warning of Python >= 3.12 on a fork of a
    process with threads silenced: a run's other threads (the stop watchdog, blocked in
    ``recv``; BLAS's pool, which re-forms after a fork) hold no lock a child takes."""
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*multi-threaded.*fork", DeprecationWarning)
        yield


def fork_available() -> bool:
    """Whether this system forks workers (Linux, with the ``fork`` start method): macOS and
    Windows have no safe ``fork`` of a process that has loaded native libraries."""
    import multiprocessing

    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def resolve_backend(backend: str) -> str:
    """The backend a run uses for ``--backend backend``: ``auto`` is ``fork`` where
    :func:`fork_refused` finds nothing against it, else ``loky``; the others are themselves."""
    if backend != "auto":
        return backend
    return "loky" if fork_refused() else "fork"


def fork_refused() -> str | None:
    """Why workers cannot be forked from this process (``--backend fork``), or ``None``: no
    fork on this system; more than one thread a cell (:func:`threads_per_cell`: a worker forked
    from a process whose compiled kernels started their thread pool could inherit it half
    made); or JAX loaded in this process (its threads run from its import on, and a fork of them
    can deadlock: a Python session that imported jax before calling the API)."""
    if not fork_available():
        return "--backend fork needs Linux's fork; use --backend loky"
    if threads_per_cell() > 1:
        return (
            f"--backend fork runs one thread a cell, not {threads_per_cell()} (--threads); "
            "use --backend loky"
        )
    if "jax" in sys.modules:
        return "--backend fork cannot fork this process, which has loaded jax; use --backend loky"
    return None
