"""What a first compilation compiles (docs/algorithms.md §1.9): each of ilnrun's kernels once, for
one signature, never for a constant argument's value; none of numba's own functions twice for
one signature (kernels whose numba options differ compile them again); no shape-mismatch error
(numba compiles its message formatting for every array assigned to a slice); no random-net
code and no coordinate draws for ReLU features; no CPython wrapper, and no machine code of its
own, for a kernel that only compiled code calls. Checked on an empty compilation cache, in a
fresh interpreter, with numba's own record of what it compiles (no time is measured)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ilnrun.learners import shrinking_gradient_kernels as kernels

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ("copy_into", "add_scaled", "sub_scaled", "scale_by", "divide_by")

# Every compiled pass a ReLU run uses: Shrinking Gradient (final and averaged, its Algorithm-2
# estimates), Doubly SGD, Fixed-Random by SGD and by ridge (primal and dual).
CODE = """
import json, sys
import numpy as np
from numba.core import event
from ilnrun.features import ReLU
from ilnrun.learners import LEARNERS, load_native
from ilnrun.numeric_env import one_thread

compiled = []
stack = []

class Record(event.Listener):
    def on_start(self, ev):
        d = ev.data.get("dispatcher")
        f = getattr(d, "py_func", None)
        stack.append(f"{f.__module__}.{f.__qualname__}" if f is not None else "?")

    def on_end(self, ev):
        d = ev.data.get("dispatcher")
        name = stack.pop()
        wrapper = not getattr(d, "targetoptions", {}).get("no_cpython_wrapper", False)
        compiled.append((name, str(ev.data.get("args")), stack[-1] if stack else "", wrapper))

event.register("numba:compile", Record())
load_native()
rng = np.random.default_rng(0)
X = np.clip(rng.standard_normal((40, 6)) / 2, -1, 1)
y = np.tanh(X[:, :2].sum(1))
fmap = ReLU(6)
with one_thread():
    sg = LEARNERS["shrinking_gradient"].fit(
        X, y, fmap, np.random.default_rng(1), eta=0.3, m=30, B=1.0, average=True
    )
    sg.averaged.predict_estimated(X, X[:10], fmap, 50, np.random.default_rng(2))
    LEARNERS["doubly_sgd"].fit(X, y, fmap, np.random.default_rng(3), eta=0.05, k=2)
    fr = LEARNERS["fixed_random"].fit
    fr(X, y, fmap, np.random.default_rng(4), eta=0.05, r=20)
    fr(X, y, fmap, np.random.default_rng(5), solver="ridge", lam=0.1, r=20)
    fr(X, y, fmap, np.random.default_rng(6), solver="ridge", lam=0.1, r=80)
# per kernel compiled: its name, whether it is internal, whether its code went to the JIT
import gc
from numba.core.registry import CPUDispatcher
machine = [
    (d.py_func.__qualname__, hasattr(d, "_python_twin"),
     cres.library._final_module in cres.library._codegen._engine._ee._modules)
    for d in gc.get_objects()
    if isinstance(d, CPUDispatcher) and d.py_func.__module__.startswith("ilnrun.")
    for cres in d.overloads.values()
]
print(json.dumps({"compiled": compiled, "machine": machine}))
"""


def _last_json(code: str, cache) -> object:
    """The JSON on the last line ``code`` prints, run in a fresh process on the numba cache
    ``cache`` (empty: everything it runs is compiled there)."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(cache)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not kernels.available(), reason="numba is not available")
def test_a_relu_run_compiles_each_kernel_once(tmp_path):
    out = _last_json(CODE, tmp_path)
    compiled = out["compiled"]
    ours = [(name, args) for name, args, _, _ in compiled if name.startswith("ilnrun.")]
    names = [name for name, _ in ours]
    assert "ilnrun.learners.shrinking_gradient_kernels.sg_rounds" in names  # compiled here
    # (an overload's copies aside, and the ridge solver's array helpers: one copy for rows,
    # contiguous, and one for columns, strided)
    per_layout = {f"ilnrun.learners.random_feature_kernels._{h}" for h in HELPERS}
    kernels_ = [n for n in names if "<locals>" not in n and n not in per_layout]
    twice = sorted({n for n in kernels_ if kernels_.count(n) > 1})
    assert twice == [], f"compiled for more than one signature: {twice}"
    literal = [(n, a) for n, a in ours if "Literal[" in a]
    assert literal == [], f"compiled for a constant argument: {literal}"
    # numba's functions called by the kernels: once each (numba's own calls among themselves
    # aside: numba compiles a few of them twice, whatever the kernels do)
    called = [(n, a) for n, a, parent, _ in compiled if parent.startswith("ilnrun.")]
    again = sorted(
        {f"{n}{a}" for n, a in called if n.startswith("numba.") and called.count((n, a)) > 1}
    )
    assert again == [], f"numba's functions compiled again: {again}"
    shape_errors = [n for n, _, _, _ in compiled if "raise_with_shape_context" in n]
    assert shape_errors == [], "an array assigned to a slice in compiled code"
    assert not any(n.endswith(".net_point") for n in names), "random-net code for ReLU features"
    coordinate = [n for n, _, _, _ in compiled if "integers" in n]
    assert coordinate == [], "coordinate draws for ReLU features"
    # a kernel compiled from another one only (all of them, in this run, but the passes that
    # Python calls) has no CPython wrapper (compiled_cache.jit(internal=True))
    wrapped = sorted(
        {n for n, _, parent, wrapper in compiled if n.startswith("ilnrun.")
         and parent.startswith("ilnrun.") and wrapper and "<locals>" not in n}
    )  # fmt: skip
    assert wrapped == [], f"a CPython wrapper for kernels compiled code calls: {wrapped}"
    # nor machine code of its own: its callers carry its code (compiled_cache._link_only)
    internal = {n for n, is_internal, _ in out["machine"] if is_internal}
    assert len(internal) > 20
    compiled_to_code = sorted({n for n, is_int, code in out["machine"] if is_int and code})
    assert compiled_to_code == [], f"machine code of internal kernels: {compiled_to_code}"
    called = {
        n.rsplit(".", 1)[1] for n, _, _, wrapper in compiled if wrapper and n.startswith("ilnrun.")
    }
    with_code = {n for n, _, code in out["machine"] if code}
    assert called <= with_code, f"kernels Python calls without machine code: {called - with_code}"


# One learner at a time: each learner's self-check compiles only what that learner runs.
# the qualified names of the functions numba compiles from here on, in ``compiled``
RECORD_COMPILES = """
import json
import numpy as np
from numba.core import event

compiled = []

class Record(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        f = getattr(ev.data.get("dispatcher"), "py_func", None)
        compiled.append(f.__qualname__ if f is not None else "?")

event.register("numba:compile", Record())
"""

ONE_BY_ONE = (
    RECORD_COMPILES
    + """
from ilnrun.features import ReLU
from ilnrun.learners import LEARNERS, load_native
from ilnrun.numeric_env import one_thread

load_native()
X = np.clip(np.random.default_rng(0).standard_normal((40, 6)) / 2, -1, 1)
y = np.tanh(X[:, :2].sum(1))
seen = {}
with one_thread():
    for name, kw in (("doubly_sgd", dict(eta=0.05, k=2)), ("fixed_random", dict(eta=0.05, r=9)),
                     ("shrinking_gradient", dict(eta=0.3, m=30, B=1.0))):
        before = len(compiled)
        LEARNERS[name].fit(X, y, ReLU(6), np.random.default_rng(1), **kw)
        seen[name] = compiled[before:]
print(json.dumps(seen))
"""
)


@pytest.mark.skipif(not kernels.available(), reason="numba is not available")
def test_a_learner_compiles_only_its_own_passes(tmp_path):
    """A Doubly SGD fit compiles no Fixed-Random pass (their self-checks run apart), and a
    Shrinking Gradient fit no Algorithm-2 estimates (checked where estimates first run)."""
    seen = _last_json(ONE_BY_ONE, tmp_path)
    assert "dsgd_rounds" in seen["doubly_sgd"] and "fr_rounds" not in seen["doubly_sgd"]
    assert "fr_rounds" in seen["fixed_random"] and "ridge_rounds" not in seen["fixed_random"]
    assert "sg_rounds" in seen["shrinking_gradient"]
    assert "chunk_estimates_compiled" not in seen["shrinking_gradient"]


STREAM_ONLY = (
    RECORD_COMPILES
    + """
from ilnrun.features import Coordinate, ReLU
from ilnrun.learners import load_native
from ilnrun.learners.base import KernelExpansion

load_native()
rng = np.random.default_rng(0)
X, alpha = rng.standard_normal((30, 6)), rng.standard_normal(20)
seen = {}
for name, fmap, draws in (
    ("coordinate", Coordinate(6), "inverse_cdf_v2"),
    ("relu", ReLU(6), "inverse_cdf_v2"),
    ("multinomial", Coordinate(6), "multinomial"),
):
    before = len(compiled)
    KernelExpansion(alpha).predict_estimated(X, X, fmap, 40, rng, draws=draws)
    seen[name] = compiled[before:]
print(json.dumps(seen))
"""
)


@pytest.mark.skipif(not kernels.available(), reason="numba is not available")
def test_estimates_compile_only_their_own_kernels(tmp_path):
    """Algorithm-2 estimates are checked against numpy by their own self-check and compile no
    Shrinking Gradient pass; ``inverse_cdf_v2``'s no multinomial estimates either."""
    seen = _last_json(STREAM_ONLY, tmp_path)
    assert "hashed_coordinate_estimates" in seen["coordinate"]
    assert "drawn_estimates" in seen["relu"]
    assert "coordinate_estimates" in seen["multinomial"]
    for name, names in seen.items():
        assert "sg_rounds" not in names and "chunk_estimates_compiled" not in names
        assert name == "multinomial" or "multinomial_rows" not in names
