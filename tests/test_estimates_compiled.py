"""The compiled coordinate Algorithm-2 test estimates give the numpy code's numbers bit for bit.

- the compiled multinomial (``estimate_kernels.multinomial``) draws numpy's
  ``Generator.multinomial`` counts and leaves the generator in the same state: many seeds,
  ``n`` and ``d``, skewed laws, zeros, ``p > 0.5``, rows whose count runs out early, inversion and
  BTPE binomials;
- numba's ``Generator.integers`` draws numpy's ``w`` for the ranges used;
- ``estimate_coordinate`` equals ``estimate_numpy`` and the golden digests that the numpy code
  wrote before the compiled estimates existed (``tests/estimate_cases.py``), for every chunk
  layout, alpha with zeros, all-zero alpha, both sign paths, non-contiguous inputs;
- ``predict_estimated`` runs it for coordinate maps; numpy where numba is absent, switched
  off, or disagrees (with one note).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilnrun.features import Coordinate, ReLU
from ilnrun.learners import base
from ilnrun.learners import estimate_kernels as ek
from ilnrun.learners import pcg64_kernels as pcg
from ilnrun.learners import shrinking_gradient_kernels as kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
import estimate_cases as cases  # noqa: E402
import golden_values as gv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = gv.golden("estimates_numpy")
IDS = [c[0] for c in cases.CASES]
needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not available")


def law(kind: str, d: int, rng: np.random.Generator) -> np.ndarray:
    """A probability vector of ``d`` categories of a given shape."""
    if d == 1:
        p = np.ones(1)
    elif kind == "flat":
        p = np.full(d, 1.0 / d)
    elif kind == "dirichlet_sparse":
        p = rng.dirichlet(np.full(d, 0.2))
    elif kind == "dirichlet_even":
        p = rng.dirichlet(np.full(d, 5.0))
    elif kind == "zeros":
        p = rng.random(d) * (rng.random(d) < 0.5)
        p = p / p.sum() if p.sum() > 0 else np.full(d, 1.0 / d)
    elif kind == "skewed":
        p = rng.random(d) ** 12
        p /= p.sum()
    elif kind == "one":
        p = np.zeros(d)
        p[rng.integers(0, d)] = 1.0
    elif kind == "heavy_first":  # p > 0.5 first, then the rest
        p = rng.random(d)
        p[0] = 3.0 * p[1:].sum() + 1e-3
        p /= p.sum()
    else:  # "last_zero": the last category has no mass
        p = np.abs(rng.standard_normal(d))
        p[-1] = 0.0
        p /= p.sum()
    return p


KINDS = (
    "flat",
    "dirichlet_sparse",
    "dirichlet_even",
    "zeros",
    "skewed",
    "one",
    "heavy_first",
    "last_zero",
)


def same_draws(n: int, pvals: np.ndarray, rows: int, seed: int) -> None:
    want, got = np.random.default_rng(seed), np.random.default_rng(seed)
    expected = want.multinomial(n, pvals, size=rows)
    drawn = ek.multinomial(got, n, pvals, rows)
    np.testing.assert_array_equal(drawn, expected, strict=True)
    assert want.bit_generator.state == got.bit_generator.state


@needs_numba
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 29, 31, 100, 1000, 25_000, 1_000_000])
def test_multinomial_matches_numpy(kind, n):
    """Fixed seeds: every law shape at counts that use inversion only, both, and mostly BTPE."""
    rng = np.random.default_rng(n * 31 + len(kind))
    for d in (1, 2, 3, 7, 40, 200):
        same_draws(n, law(kind, d, rng), int(rng.integers(1, 30)), int(rng.integers(2**32)))


@needs_numba
@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(KINDS),
    d=st.integers(1, 300),
    n=st.one_of(st.integers(0, 80), st.integers(0, 5000), st.integers(0, 10**7)),
    rows=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_multinomial_matches_numpy_property(kind, d, n, rows, seed):
    same_draws(n, law(kind, d, np.random.default_rng(seed)), rows, seed)


@needs_numba
def test_binomials_match_numpy():
    """Each binomial alone against ``Generator.binomial`` (numpy's same routine): BTPE over
    ``n p > 30`` (near-mode ratios and the squeeze with Stirling's bound), and inversion at
    ``n p <= 30``, sharing one generator stream (its PCG64 state, put back at the end)."""
    meta = np.random.default_rng(7)
    want, got = np.random.default_rng(99), np.random.default_rng(99)
    st = pcg.state_of(got)
    for _ in range(3000):
        n = int(meta.choice([62, 300, 5000, 10**6, 10**9]))
        p = float(meta.uniform(31.0 / n, 0.5))
        assert ek.binomial_btpe(st, n, p) == want.binomial(n, p)
    chain = np.empty(ek.CHAIN)
    for _ in range(3000):
        n = int(meta.integers(1, 2000))
        p = float(meta.uniform(0.0, min(0.5, 30.0 / n)))
        if p == 0.0:
            continue
        q = 1.0 - p
        chain[0] = np.exp(n * np.log(q))
        npq = n * p
        b = npq + 10.0 * np.sqrt(npq * q + 1)
        bound = n if n < b else int(b)
        x, _ = ek.binomial_inversion(st, n, p, q, bound, chain, 1)
        assert x == want.binomial(n, p)
    pcg.put_state(got, st)
    assert want.bit_generator.state == got.bit_generator.state


@needs_numba
def test_pvals_used_as_given():
    """numpy uses ``pvals`` as given (only checked): a law whose sum is a little off 1 (within
    numpy's tolerance on ``pvals[:-1]``) draws the same counts."""
    p = np.array([0.3, 0.2, 0.25, 0.25 + 5e-13])
    same_draws(500, p, 50, 3)
    p = np.array([0.5 - 1e-13, 0.2, 0.3])  # rest runs out before the last category
    same_draws(1000, p, 50, 4)


@needs_numba
@pytest.mark.parametrize("D", [1, 2, 3, 5, 800, 1024, 1025, 65_537, 2**31 + 5])
def test_integers_match_numpy(D):
    """numba's ``Generator.integers(0, D, size)`` (int64) draws numpy's numbers."""
    import numba

    @numba.njit
    def draw(rng, D, n):
        return rng.integers(0, D, n)

    for n in (1, 7, 1000):
        want, got = np.random.default_rng(D + n), np.random.default_rng(D + n)
        np.testing.assert_array_equal(draw(got, D, n), want.integers(0, D, size=n), strict=True)
        assert want.bit_generator.state == got.bit_generator.state


@pytest.mark.parametrize("case", cases.CASES, ids=IDS)
def test_numpy_estimates_match_golden(case):
    gv.assert_matches({"estimates": cases.run(case, "estimate_numpy")}, GOLDEN[case[0]])


@needs_numba
@pytest.mark.parametrize("case", cases.CASES, ids=IDS)
def test_compiled_estimates_match_numpy_and_golden(case):
    compiled = cases.run(case, "estimate_coordinate")
    np.testing.assert_array_equal(compiled, cases.run(case, "estimate_numpy"), strict=True)
    gv.assert_matches({"estimates": compiled}, GOLDEN[case[0]])
    gv.assert_matches({"estimates": cases.run(case, "predict_estimated")}, GOLDEN[case[0]])


@needs_numba
def test_predict_estimated_chooses_the_compiled_coordinate_path(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 4))
    assert ek.use_compiled(Coordinate(4), X, X, rng, base._numpy_estimate)
    assert not ek.use_compiled(ReLU(4), X, X, rng, base._numpy_estimate)
    assert not ek.use_compiled(Coordinate(4), X.astype(np.float32), X, rng, base._numpy_estimate)
    # another bit generator than PCG64: the numpy code (its stream is not written out)
    other = np.random.Generator(np.random.MT19937(0))
    assert not ek.use_compiled(Coordinate(4), X, X, other, base._numpy_estimate)
    called = []
    monkeypatch.setattr(ek, "estimate", lambda *a: called.append(1) or np.zeros(len(a[1])))
    base.KernelExpansion(np.ones(6)).predict_estimated(
        X, X, Coordinate(4), 5, np.random.default_rng(1)
    )
    assert called == [1]


@needs_numba
def test_the_self_check_passes():
    assert ek.agrees(base._numpy_estimate)


@needs_numba
@pytest.mark.parametrize("where", ["btpe", "state", "signed"])
def test_the_self_check_fails_where_numpy_draws_otherwise(where):
    """The self-check compares estimates and the generator's state after them: a reference that
    draws its counts in another order only where the binomials are BTPE's (``m = 700``), one that
    draws one number more, or one whose signed case differs, is told apart."""

    def reference(alpha, X, X_eval, fmap, m, rng, chunk_pairs):
        if where == "btpe" and m == 700:
            chunk_pairs = 10**6  # every row's counts in one call: another order of draws
        out = base._numpy_estimate(alpha, X, X_eval, fmap, m, rng, chunk_pairs)
        if where == "state" and m == 7:
            rng.random()
        if where == "signed" and np.any(alpha < 0):
            out[-1] = np.nextafter(out[-1], np.inf)
        return out

    assert not ek.agrees(reference)


def test_disagreeing_build_runs_numpy(monkeypatch, capsys):
    """A build whose compiled draws or estimates differ runs the numpy code, with one note."""
    monkeypatch.setattr(ek, "_AGREES", [])
    monkeypatch.setattr(kernels, "_NOTED", set())
    monkeypatch.setattr(ek, "agrees", lambda reference: False)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 4))
    if kernels.available():
        assert not ek.use_compiled(Coordinate(4), X, X, rng, base._numpy_estimate)
        assert not ek.use_compiled(Coordinate(4), X, X, rng, base._numpy_estimate)
        assert capsys.readouterr().err.count("numpy code runs instead") == 1
    case = cases.CASES[2]
    gv.assert_matches({"estimates": cases.run(case, "predict_estimated")}, GOLDEN[case[0]])


FALLBACK = """
import estimate_cases as c, golden_values as g
from ilnrun.learners import shrinking_gradient_kernels as k
gold = g.golden("estimates_numpy")["figure1_like"]
case = [x for x in c.CASES if x[0] == "figure1_like"][0]
print(k.available(), not g.beyond({"estimates": c.run(case, "predict_estimated")}, gold))
"""


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", **env},
        check=False,
    )


def test_switched_off_runs_numpy_quietly():
    proc = _run(FALLBACK, {"ILNRUN_NO_NUMBA": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
    assert "note:" not in proc.stderr


def test_without_numba_runs_numpy_with_one_note():
    hide = "import sys; sys.modules['numba'] = None\n"
    proc = _run(hide + FALLBACK, {"ILNRUN_NO_NUMBA": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "numba is not available" in notes[0]


@needs_numba
def test_many_stored_examples_keep_fewer_setups_and_the_same_estimates():
    """Over many stored examples the inversion set-ups get fewer slots a category (their
    probabilities held under ``SETUP_BYTES``, a power of two, at least one), and the estimates
    stay numpy's: the slots only say how often a set-up is computed again."""
    for d, slots in ((200, ek.SLOTS), (3000, 16), (10**5, 1)):
        keys, bounds, filled, chains = ek.new_setups(d)
        assert keys.shape == bounds.shape == filled.shape == (d, slots)
        assert chains.shape == (d, slots, ek.CHAIN)
        assert chains.nbytes <= ek.SETUP_BYTES or slots == 1
    rng = np.random.default_rng(4)
    for d in (3000, 9000):  # 16 and 4 slots a category
        X, X_eval = rng.standard_normal((d, 5)), rng.standard_normal((6, 5))
        alpha = rng.standard_normal(d) * 0.25 ** rng.integers(0, 3, d)
        pred = base.KernelExpansion(alpha)
        args = (X, X_eval, Coordinate(5), 400)
        want = pred.estimate_numpy(*args, np.random.default_rng(d))
        got = pred.estimate_coordinate(*args, np.random.default_rng(d))
        np.testing.assert_array_equal(got, want, strict=True)
