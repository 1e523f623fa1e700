"""numba's on-disk cache of the compiled kernels (ilnrun/compiled_cache.py): a damaged file is
rebuilt, never an exit status 1 (a truncated index ended every later run with click's bare
``Aborted!``, garbage with a pickle traceback), and several processes compiling on one empty
cache at once all finish with the same numbers.

The kernels compiled here are the small family of ilnrun/theory.py (the exact replay of a
Shrinking Gradient pass: about a second to compile), except in the one command-line test, which
compiles the coordinate Shrinking Gradient pass once (about 10 CPU-seconds), and in the test of
the kernels' compiler (``_kernel_compiler``: the same code as numba's), which compiles every
pass of every map family twice, in two processes at once (about 18 s)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

numba = pytest.importorskip("numba")

from ilnrun import compiled_cache, theory  # noqa: E402
from ilnrun.learners.compiled import switched_off  # noqa: E402
from tests.conftest import invoke, tiny_config, write_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

REPLAY = """
import numpy as np
from ilnrun.theory import _replays, sg_exact_online_predictions
rng = np.random.default_rng(0)
A = rng.standard_normal((40, 5))
out = sg_exact_online_predictions(A @ A.T, rng.standard_normal(40), np.sort(rng.integers(0, 3, 40)))
stats = _replays()[0].stats
print(out.tobytes().hex(), sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
"""


def _env(cache: Path) -> dict:
    return {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}


def _replay(cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", REPLAY],
        env=_env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_four_first_compilations_at_once_agree(tmp_path):
    """4 processes compile on one empty cache at the same time: all exit 0 with the same numbers,
    and the cache they leave is whole (a fifth process loads the kernel from it)."""
    cache = tmp_path / "cache"
    procs = [_replay(cache) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err and "damaged" not in err, err
    assert len({out.split()[0] for out, _ in outs}) == 1
    assert list(cache.rglob(compiled_cache.LOCK_NAME))
    p = _replay(cache)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert out.split() == [outs[0][0].split()[0], "1", "0"]  # one cache hit, no compilation


def _fresh_replay(cache: Path, monkeypatch) -> tuple[object, np.ndarray]:
    """A new dispatcher of the replay kernel (as a new process has), cached under ``cache``;
    its result on a small problem."""
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(cache))
    kernel = compiled_cache.jit(theory._replay_kernel, nogil=True)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 4))
    n = 30
    out = np.zeros(n)
    shrinks = np.sort(rng.integers(0, 3, n)).astype(np.int64)
    kernel(A @ A.T, rng.standard_normal(n), shrinks, out, np.zeros(n))
    return kernel, out


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(bytes(range(256)) * 8)
    elif how == "empty":
        path.write_bytes(b"")
    else:  # one byte changed in the middle: still a pickle, no longer the compiled code
        mid = len(data) // 2
        path.write_bytes(data[:mid] + bytes([data[mid] ^ 0x5A]) + data[mid + 1 :])


@pytest.mark.parametrize("how", ["truncate", "garbage", "empty", "flip"])
@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_a_damaged_cache_file_is_rebuilt(tmp_path, monkeypatch, capsys, how, suffix):
    cache = tmp_path / "cache"
    _, expected = _fresh_replay(cache, monkeypatch)
    files = sorted(cache.rglob(f"*{suffix}"))
    assert files
    for f in files:
        _damage(f, how)
    kernel, out = _fresh_replay(cache, monkeypatch)
    np.testing.assert_array_equal(out, expected)
    assert sum(kernel.stats.cache_misses.values()) == 1  # compiled again
    err = capsys.readouterr().err
    assert f"removed damaged files of numba's compiled-kernel cache in {files[0].parent}" in err
    kernel, out = _fresh_replay(cache, monkeypatch)  # and cached anew
    np.testing.assert_array_equal(out, expected)
    assert sum(kernel.stats.cache_hits.values()) == 1


def test_an_unremovable_damaged_cache_is_named(tmp_path, monkeypatch, capsys):
    """Where the damaged files cannot be removed, one line names the directory and the fix, and
    the kernel is compiled in memory: the numbers are the same."""
    cache = tmp_path / "cache"
    _, expected = _fresh_replay(cache, monkeypatch)
    for f in cache.rglob("*.nbi"):
        _damage(f, "garbage")

    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(compiled_cache, "_remove", refuse)
    _, out = _fresh_replay(cache, monkeypatch)
    np.testing.assert_array_equal(out, expected)
    err = capsys.readouterr().err
    assert "cannot be removed (Permission denied): delete that directory" in err


def test_an_unwritable_cache_compiles_in_memory(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    from numba.core import caching

    monkeypatch.setattr(caching.IndexDataCacheFile, "_save_data", full)
    _, out = _fresh_replay(cache, monkeypatch)
    assert np.isfinite(out).all()
    assert "cannot write numba's compiled-kernel cache" in capsys.readouterr().err


@pytest.mark.skipif(switched_off(), reason="the compiled kernels are switched off")
def test_a_run_on_a_damaged_cache_exits_0_with_the_same_numbers(tmp_path, monkeypatch):
    """``ilnrun run`` on a cache whose every file of the Shrinking Gradient kernels is garbage
    (numba's own file names and ilnrun's): exit 0, a note naming the directory, no traceback,
    the rows of a run on the intact cache."""
    from ilnrun.learners import shrinking_gradient_kernels as sgk

    cfg = tiny_config(repetitions=1, **{"dataset.D": [20]})
    cfg["methods"] = {"shrinking_gradient": cfg["methods"]["shrinking_gradient"]}
    path = write_config(tmp_path / "sg.yaml", cfg)
    ref = tmp_path / "ref"
    assert invoke(["run", path, "--out", ref, "-q"]).exit_code == 0

    cache = tmp_path / "cache"
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(cache))
    damaged = 0
    for obj in vars(sgk).values():
        if isinstance(obj, numba.core.registry.CPUDispatcher):
            checked = compiled_cache._cache_class()(obj.py_func)
            index = Path(checked._cache_file._index_path)
            index.parent.mkdir(parents=True, exist_ok=True)
            plain = index.with_name(index.name.replace(compiled_cache.SUFFIX, ""))
            for p in (index, plain):
                p.write_bytes(b"\x80\x04garbage")
                p.with_suffix(".1.nbc").write_bytes(b"\x80\x04K")
            damaged += 1
    assert damaged >= 5
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "ilnrun.cli", "run", str(path), "--out", str(out), "-q"],
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "Aborted" not in res.stderr
    assert "removed damaged files of numba's compiled-kernel cache in" in res.stderr
    timing = ["wall_s", "eval_s", "train_s", "cell_s"]
    a, b = (pd.read_csv(d / "runs.csv") for d in (ref, out))
    pd.testing.assert_frame_equal(
        a.drop(columns=[c for c in timing if c in a]),
        b.drop(columns=[c for c in timing if c in b]),
        check_exact=True,
    )


class _Recorder:
    """A dispatcher whose compilation records whether the garbage collector was on, and may
    raise or compile another kernel inside it (numba compiles callees during type inference)."""

    def __init__(self, inner=None, fail: bool = False) -> None:
        self.inner, self.fail, self.gc_on = inner, fail, []

    def compile(self, sig: str) -> str:
        self.gc_on.append(gc.isenabled())
        if self.inner is not None:
            self.inner.compile(sig)
        self.gc_on.append(gc.isenabled())
        if self.fail:
            raise RuntimeError("a failed compilation")
        return sig


@pytest.mark.parametrize("was_on", [True, False])
def test_compilations_pause_the_garbage_collector_and_restore_it(was_on):
    """A compilation runs without the cyclic collector (``_no_gc``), nested ones too; after it,
    and after one that raised, the collector is as it was (on, or off where the caller had
    switched it off)."""
    inner = compiled_cache._uninterrupted(_Recorder())
    outer = compiled_cache._uninterrupted(_Recorder(inner=inner))
    failing = compiled_cache._uninterrupted(_Recorder(fail=True))
    before = gc.isenabled()
    (gc.enable if was_on else gc.disable)()
    try:
        assert outer.compile("(float64,)") == "(float64,)"
        assert gc.isenabled() is was_on
        with pytest.raises(RuntimeError):
            failing.compile("(float64,)")
        assert gc.isenabled() is was_on
    finally:
        (gc.enable if before else gc.disable)()
    for d in (outer, inner, failing):
        assert d.gc_on and not any(d.gc_on)


def test_a_compilation_runs_in_its_own_thread_unless_nested():
    """A compilation called from Python runs in a thread of its own (``_in_own_thread``: a
    shallow stack, away from CPython 3.11-3.13's frame-chunk edge), its result or its error
    handed back; one called while this thread holds numba's compiler lock (numba compiling a
    caller) runs right here, as a new thread would wait for that lock forever."""
    pytest.importorskip("numba")
    from numba.core.compiler_lock import global_compiler_lock

    here = threading.current_thread()
    seen: list[threading.Thread] = []

    def compile_(sig):
        seen.append(threading.current_thread())
        if sig == "bad":
            raise ValueError("no such signature")
        return sig.upper()

    assert compiled_cache._in_own_thread(compile_, "(float64,)") == "(FLOAT64,)"
    assert seen[-1] is not here and seen[-1].name == "ilnrun-compile"
    with pytest.raises(ValueError, match="no such signature"):
        compiled_cache._in_own_thread(compile_, "bad")
    with global_compiler_lock:
        assert compiled_cache._in_own_thread(compile_, "(int64,)") == "(INT64,)"
    assert seen[-1] is here
    assert not any(t.name == "ilnrun-compile" for t in threading.enumerate())


def test_a_kernel_and_its_callee_compile_in_one_thread_of_their_own():
    """Real kernels called from Python, wrapped as :func:`compiled_cache.jit` wraps its
    dispatchers (without the disk cache: compiled in every run of the test): numba compiles the
    kernel, and the kernel it calls (while typing it, holding the compiler lock), in one
    ``ilnrun-compile`` thread."""
    numba = pytest.importorskip("numba")
    import numba.core.event as ev

    seen: list[tuple[str, str]] = []

    class Listener(ev.Listener):
        def on_start(self, event):
            name = event.data["dispatcher"].py_func.__name__
            seen.append((name, threading.current_thread().name))

        def on_end(self, event):
            pass

    def add_one(x):
        return x + 1.0

    callee = compiled_cache._uninterrupted(numba.njit(add_one))

    def add_two(x):
        return callee(x) + 1.0

    kernel = compiled_cache._uninterrupted(numba.njit(add_two))
    with ev.install_listener("numba:compile", Listener()):
        assert kernel(1.0) == 3.0
    assert sorted(seen) == [("add_one", "ilnrun-compile"), ("add_two", "ilnrun-compile")]


LINKED = """
from ilnrun.compiled_cache import jit


def _half(x):
    if x < 0.0:
        raise ValueError("negative", x)  # a dynamic exception: compiled code reads the environment
    return 0.5 * x


half = jit(_half, internal=True)


def _first(x):
    return half(x) + 1.0


def _second(x):
    return half(x) + 2.0


def _third(x):
    return half(x) + 3.0


first, second, third = jit(_first), jit(_second), jit(_third)
"""

LINKED_RUN = """
import sys
sys.path.insert(0, sys.argv[1])
import linked
from ilnrun.compiled_cache import _link_only

callers = [getattr(linked, name) for name in sys.argv[2:]]
out = []
for k, f in enumerate(callers):
    out.append(f(3.0))
    try:
        f(-1.0 - k)
    except ValueError as exc:
        out.append(exc.args)
(cres,) = linked.half.overloads.values()
library = cres.library
engine = library._codegen._engine
out.append(type(library) is _link_only().Library)
out.append(library._final_module in engine._ee._modules)  # (handed to the JIT: machine code)
out.append(sum(linked.half.stats.cache_hits.values()))
# the callers' code holds the kernel's, optimised with theirs: inlined (no call, no definition)
name = cres.fndesc.llvm_func_name
for f in callers:
    (caller,) = f.overloads.values()
    lines = caller.library.get_llvm_str().splitlines()
    out.append(any(name in s and ("call " in s or "define " in s) for s in lines))
print(repr(out))
"""


def test_an_internal_kernel_is_ir_only_and_its_callers_raise_from_it(tmp_path):
    """An internal kernel (``jit(internal=True)``) is compiled to IR that its callers link, with
    no machine code of its own (nothing the JIT defines under its name), cached as that IR and
    linked from the cache into a caller compiled in a later process. A dynamic exception raised
    in it (compiled code that reads the kernel's numba environment, which exists only in its
    callers' code) reaches Python with its arguments from each caller, the one compiled after
    the cache load included. Each caller's code holds the kernel's inlined (LLVM inlines the
    linked IR: no call to it and no definition of it is left)."""
    (tmp_path / "linked.py").write_text(LINKED)
    env = {**_env(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(*callers: str) -> list:
        proc = subprocess.run(
            [sys.executable, "-c", LINKED_RUN, str(tmp_path), *callers],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return eval(proc.stdout)  # (the list printed by LINKED_RUN)

    cold = run("first", "second")
    assert cold[:4] == [2.5, ("negative", -1.0), 3.5, ("negative", -2.0)]
    assert cold[4:] == [True, False, 0, False, False]
    warm = run("third")  # half loaded from the cache, linked into a caller compiled anew
    assert warm == [4.5, ("negative", -1.0), True, False, 1, False]


@pytest.mark.skipif(switched_off(), reason="the compiled kernels are switched off")
def test_every_kernel_compiles_with_shared_options():
    """Every kernel (``compiled_cache.jit``, in every module that defines kernels) compiles with
    ``_kernel_compiler``'s compiler, whose copies of a compilation's options (numba's
    ``Flags``, the key of its typing caches) are one object per set of values: equal to a plain
    ``Flags`` of the same values and to no other, hashed as numba hashes one; the copy of a
    shared one is a plain ``Flags`` to change, and changing it leaves the shared one as it was."""
    import importlib

    from numba.core.compiler import Flags
    from numba.core.registry import CPUDispatcher

    compiler = compiled_cache._kernel_compiler()
    assert compiler is not None
    kernels = []
    for name in (
        "ilnrun.learners.pcg64_kernels", "ilnrun.learners.shrinking_gradient_kernels",
        "ilnrun.learners.random_feature_kernels", "ilnrun.learners.estimate_kernels",
        "ilnrun.learners.inverse_cdf_kernels", "ilnrun.theory",
    ):  # fmt: skip
        module = importlib.import_module(name)
        kernels += [v for v in vars(module).values() if isinstance(v, CPUDispatcher)]
    assert len(kernels) > 30
    for k in kernels:
        assert issubclass(k._compiler.pipeline_class, compiler), k.py_func.__qualname__

    shared = compiler.flags_class
    a, b, c = Flags(), Flags(), Flags()
    for f in (a, b, c):
        f.nrt = True
    c.error_model = "numpy"
    sa, sb, sc = (shared(f).copy() for f in (a, b, c))
    assert sa is sb and sa is not sc
    assert sa == a and sa != c and sa != sc and sc == c
    assert hash(sa) == hash(a) == hash(sc)
    free = sa.copy()
    assert type(free) is Flags and free == sa
    free.nrt = False
    assert sa.nrt and shared(a).copy() is sa


# every compiled pass of every map family (bench/first_compile.py's configs), with each
# Algorithm-2 stream's estimates
PASSES_SCRIPT = """
import contextlib, hashlib, json, sys
from numba.core import codegen
from ilnrun import api, compiled_cache

if sys.argv[1] == "full":  # numba's whole pipeline and helpers, its Python IR left as it is
    compiled_cache.UNUSED_PASSES = frozenset()
    compiled_cache._emptied = lambda module: None
    compiled_cache._memoized_helpers = contextlib.nullcontext
modules = {}
finalize = codegen.CPUCodeLibrary.finalize


def record(library):
    finalize(library)
    text = str(library._final_module).encode()
    modules.setdefault(library.name, []).append(hashlib.sha256(text).hexdigest())


codegen.CPUCodeLibrary.finalize = record
sys.path.insert(0, sys.argv[2])  # bench/: first_compile's config runs every compiled pass
from first_compile import FAMILIES, config

for family in FAMILIES:
    for draws in ("multinomial", "inverse_cdf_v1", "inverse_cdf_v2"):
        api.run_experiment(config(family, draws))
print(json.dumps(modules))
"""


def test_unused_passes_change_no_kernel(tmp_path):
    """The kernels' compiler (``compiled_cache._kernel_compiler``) changes no code: every
    compiled pass of every map family (and the estimates of every Algorithm-2 stream), compiled
    on an empty cache once by it and once with numba's whole pipeline (the passes of
    ``UNUSED_PASSES`` run), numba's own helpers (no ``_memoized_helpers``) and numba's Python
    IR left as it is (two processes at once), gives the same LLVM module, optimised and linked,
    for every function numba compiles (the kernels, their internal callees, numba's own
    implementations)."""
    procs = {}
    for pipeline in ("lean", "full"):
        procs[pipeline] = subprocess.Popen(
            [sys.executable, "-c", PASSES_SCRIPT, pipeline, str(ROOT / "bench")],
            env=_env(tmp_path / pipeline),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    modules = {}
    for pipeline, p in procs.items():
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        modules[pipeline] = json.loads(out)
    lean, full = modules["lean"], modules["full"]
    assert lean.keys() == full.keys()
    compiled = {name.split(".")[-1] for name in lean}
    kernels = (
        "sg_rounds", "coordinate_estimates", "hashed_coordinate_estimates", "drawn_estimates",
        "chunk_estimates_compiled", "dsgd_rounds", "fr_rounds", "ridge_rounds",
        "_replay_kernel", "_replay_primal", "binomial_btpe",
    )  # fmt: skip
    assert set(kernels) <= compiled, set(kernels) - compiled
    differ = sorted(name for name in lean if lean[name] != full[name])
    assert not differ, differ


def test_memoized_helpers_answer_as_numbas_and_are_put_back():
    """Inside ``_memoized_helpers`` (nested too) numba's and llvmlite's helpers are replaced by
    ones giving the same answers: whether a lowering function takes ``loc``, a type's ABI size
    and alignment, and the ufunc typing of a binary operator (``None`` for two scalars, the
    same signature as numba's with an array); after the outermost block numba's own are back."""
    import operator

    from llvmlite import ir
    from numba.core import base, types
    from numba.core.registry import cpu_target
    from numba.core.typing.npydecl import NumpyRulesArrayOperator

    ctx = cpu_target.typing_context
    ctx.refresh()
    add = ctx.resolve_value_type(operator.add).templates
    (template,) = [t for t in add if issubclass(t, NumpyRulesArrayOperator)]
    td = cpu_target.target_context.target_data
    lltypes = [
        ir.IntType(8),
        ir.DoubleType(),
        ir.LiteralStructType([ir.IntType(8), ir.DoubleType()]),
    ]
    operands = [
        (types.float64, types.float64),
        (types.int64, types.float64),
        (types.float64[::1], types.float64),
        (types.int64[:, ::1], types.float64[:, ::1]),
    ]

    def loc(context, builder, sig, args, loc=None): ...

    def no_loc(context, builder, sig, args): ...

    def answers() -> list:
        out = [base._has_loc(loc), base._has_loc(no_loc)]
        for t in lltypes:
            out += [t.get_abi_size(td), t.get_abi_alignment(td)] * 2  # (twice: remembered)
        for args in operands:
            out.append(template(ctx).generic(args, {}))
        return out

    own = (base._has_loc, ir.Type.get_abi_size, NumpyRulesArrayOperator.generic)
    want = answers()
    assert want[:2] == [True, False] and want[-4:-2] == [None, None]
    assert want[-2] is not None and want[-1] is not None
    with compiled_cache._memoized_helpers():
        assert base._has_loc is not own[0] and NumpyRulesArrayOperator.generic is not own[2]
        with compiled_cache._memoized_helpers():
            assert answers() == want
        assert base._has_loc is not own[0]  # (still: the outer block's)
        assert answers() == want
    assert (base._has_loc, ir.Type.get_abi_size, NumpyRulesArrayOperator.generic) == own


def _comprehension(n):
    return np.array([i * 2.0 for i in range(n)]).sum()


def test_a_kernel_that_defines_a_function_compiles_with_every_pass(tmp_path, monkeypatch):
    """A kernel that defines a function (here a comprehension: numba inlines it with a pass of
    ``UNUSED_PASSES``, without which it fails to compile) is compiled with numba's whole
    pipeline, and runs."""
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    assert compiled_cache.jit(_comprehension)(4) == 12.0
