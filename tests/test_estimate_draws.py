"""The Algorithm-2 streams ``inverse_cdf_v1`` and ``inverse_cdf_v2``
(``ilnrun.learners.estimate_draws``; ``evaluation.estimate_draws``, docs/protocol.md §5.7).

- The contract: the numpy code draws what each stream's definition says, written plainly here
  (:func:`contract`: one ``searchsorted`` over all keys, one ``np.mean`` a row; SplitMix64 in
  Python integers), bit for bit and with the generator left in the same state; the index table
  is ``searchsorted`` exactly; the stored values of the first numbers keep each versioned stream
  from changing.
- The compiled estimates (coordinate: one call with its own PCG64 draws, or SplitMix64's; ReLU,
  Fourier, random-net: ``drawn_estimates``) equal the numpy code bit for bit; the self-check
  passes, and a build that disagrees runs numpy.
- The law: against the exact mean and variance of Algorithm 2 (coordinate features: every
  moment of one sample is a finite sum over the ``d D`` pairs ``(i, w)``; ReLU features: the
  closed-form arc-cosine kernel), against the multinomial stream (two samples), and the index
  frequencies against ``q`` and (``inverse_cdf_v2``) the coordinates against uniform
  (chi-square).
- The config key: not stored at its default (cell ids and digests of every config unchanged),
  a new digest (same cell ids, same training pass) when set, only the Algorithm-2 columns of a
  cell move, and the estimator's ``estimate_draws``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ilnrun import config as C
from ilnrun.features import Coordinate, Fourier, RandomNet, ReLU
from ilnrun.learners import base, estimate_draws
from ilnrun.learners import shrinking_gradient_kernels as kernels
from ilnrun.learners.base import KernelExpansion
from ilnrun.learners.estimate_draws import (
    DRAWS,
    INVERSE_CDF_V1,
    INVERSE_CDF_V2,
    MULTINOMIAL,
    InverseCdf,
    check_draws,
    table_size,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import estimate_cases as cases  # noqa: E402
import golden_values as gv  # noqa: E402

STREAMS = (INVERSE_CDF_V1, INVERSE_CDF_V2)  # the versioned streams, each tested alike
NEW = INVERSE_CDF_V2  # the stream of the tests that need one (the run, the config, the estimator)
IDS = [c[0] for c in cases.CASES]
streams = pytest.mark.parametrize("new", STREAMS)
needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not available")
# a z statistic beyond this fails: two-sided p = 6.8e-6 for one comparison, so about 1e-4 for
# the ~20 comparisons of a test (fixed seeds: the tests are deterministic, the bound says how
# unlucky a seed would have to be for an unbiased stream to fail)
Z = 4.5


M64 = (1 << 64) - 1


def splitmix64(key: int, j: int) -> int:
    """``z_j = mix(key + (j + 1) gamma)`` mod ``2^64`` (SplitMix64, Steele, Lea and Flood 2014)
    in Python integers."""
    z = (key + (j + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def contract(alpha, X_train, X_eval, fmap, m, rng, chunk_pairs, draws=NEW) -> np.ndarray:
    """The stream ``draws`` as ``estimate_draws``'s docstring defines it (``chunk_pairs``: ``P``,
    already divided by the map's depth)."""
    absa = np.abs(alpha)
    total = float(absa.sum())
    out = np.zeros(len(X_eval))
    if total == 0.0:
        return out
    q, sgn = absa / total, np.sign(alpha)
    cdf = np.cumsum(q)
    d, c = len(cdf), cdf[-1]
    r = max(1, chunk_pairs // m)
    if draws == INVERSE_CDF_V2:
        key = int(rng.integers(0, 2**64, dtype=np.uint64))
    for a in range(0, len(X_eval), r):
        b = min(len(X_eval), a + r)
        if draws == INVERSE_CDF_V2:
            z = [splitmix64(key, j) for j in range(a * m, b * m)]
            u = np.array([(v >> 32) / 2**32 for v in z])
            if isinstance(fmap, Coordinate):  # w from the lower 32 bits
                W = np.array([((v & 0xFFFFFFFF) * fmap.d) >> 32 for v in z], dtype=np.int64)
            else:
                W = fmap.sample(rng, (b - a) * m)
        else:
            u = rng.random((b - a) * m)
        i = np.minimum(np.searchsorted(cdf, u * c, side="right"), d - 1)
        if draws != INVERSE_CDF_V2:
            W = fmap.sample(rng, (b - a) * m)
        for rho in range(b - a):
            j = slice(rho * m, (rho + 1) * m)
            psi_i = fmap.pairs(X_train, i[j], W[j])
            psi_x = fmap.pairs(X_eval, np.full(m, a + rho), W[j])
            out[a + rho] = total * np.mean(sgn[i[j]] * psi_i * psi_x)
    return out


def maps(D: int) -> list:
    return [Coordinate(D), ReLU(D), Fourier(D, sigma=1.5), RandomNet(D, h=3)]


# (name, stored examples, D, m, eval points, chunk_pairs) for every map
SHAPES = [
    ("small", 7, 5, 13, 9, 50),
    ("chunks", 30, 6, 40, 11, 100),
    ("one_per_chunk", 12, 4, 30, 5, 1),
    ("signed_copy", 4, 3, 200, 3, 1 << 20),
    ("wide", 60, 40, 7, 20, 1 << 20),
]


def shape_data(name: str, n: int, D: int, n_eval: int, fortran: bool = False):
    rng = np.random.default_rng(len(name) * 31 + n)
    alpha = rng.standard_normal(n) * 0.25 ** rng.integers(0, 6, n)
    alpha[rng.random(n) < 0.2] = 0.0
    X, X_eval = rng.standard_normal((n + 2, D)) / 2.0, rng.standard_normal((n_eval, D))
    if fortran:
        X, X_eval = np.asfortranarray(X), np.asfortranarray(X_eval)
    return alpha, X, X_eval


def two_calls(method, alpha, X, X_eval, fmap, m, rng, chunk, new=NEW) -> np.ndarray:
    """Two calls (the second on the rows reversed) with the stream ``new`` and the generator's
    next two numbers."""
    f = getattr(KernelExpansion(alpha), method) if isinstance(method, str) else method
    kw = {"draws": new} if isinstance(method, str) else {}
    first = f(X, X_eval, fmap, m, rng, chunk, **kw)
    second = f(X, X_eval[::-1], fmap, m, rng, chunk, **kw)
    return np.concatenate([first, second, rng.random(2)])


# ---- the contract ------------------------------------------------------------------------------


@streams
@pytest.mark.parametrize("fortran", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_numpy_draws_what_the_contract_says(shape, fortran, new):
    name, n, D, m, n_eval, chunk = shape
    alpha, X, X_eval = shape_data(name, n, D, n_eval, fortran)
    for fmap in maps(D):

        def plain(X, X_eval, fmap, m, rng, chunk, alpha=alpha):
            return contract(alpha, X, X_eval, fmap, m, rng, chunk, new)

        want = two_calls(plain, alpha, X, X_eval, fmap, m, np.random.default_rng(5), chunk)
        got = two_calls(
            "estimate_numpy", alpha, X, X_eval, fmap, m, np.random.default_rng(5), chunk, new
        )
        np.testing.assert_array_equal(got, want, strict=True, err_msg=type(fmap).name)


@streams
@pytest.mark.parametrize("case", cases.CASES, ids=IDS)
def test_numpy_draws_what_the_contract_says_on_the_estimate_cases(case, new):
    alpha, X, X_eval = cases.data(case)
    _, _, D, m, _, chunk, _, _ = case

    def plain(X, X_eval, fmap, m, rng, chunk):
        return contract(alpha, X, X_eval, fmap, m, rng, chunk, new)

    want = two_calls(plain, alpha, X, X_eval, Coordinate(D), m, np.random.default_rng(17), chunk)
    np.testing.assert_array_equal(cases.run(case, "estimate_numpy", new), want, strict=True)


GOLDEN = {new: gv.golden(f"estimates_{new}") for new in STREAMS}


@streams
@pytest.mark.parametrize("case", cases.CASES, ids=IDS)
def test_the_versioned_stream_keeps_its_numbers(case, new):
    """The values each stream gave when it was defined (``tests/estimate_cases.py --stream
    NAME``): a change of any number it draws needs a new name."""
    for method in ("estimate_numpy", "predict_estimated"):
        gv.assert_matches({"estimates": cases.run(case, method, new)}, GOLDEN[new][case[0]])


def test_the_v2_numbers_do_not_depend_on_the_chunks():
    """``inverse_cdf_v2`` with coordinate features: the draws are counted over the call, so
    any ``chunk_pairs`` gives the same estimates (and leaves the generator where it does)."""
    alpha, X, X_eval = shape_data("chunks", 30, 6, 11)
    fmap, runs = Coordinate(6), []
    for chunk in (1, 100, 1 << 20):
        for method in ("estimate_numpy", "predict_estimated"):
            rng = np.random.default_rng(9)
            runs.append(two_calls(method, alpha, X, X_eval, fmap, 40, rng, chunk, INVERSE_CDF_V2))
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0], strict=True)


def test_the_default_stream_is_multinomial():
    """``draws`` left out is ``multinomial``: the golden values written before the key."""
    old = gv.golden("estimates_numpy")
    for case in cases.CASES[:5]:
        gv.assert_matches({"estimates": cases.run(case, "predict_estimated")}, old[case[0]])
        same = cases.run(case, "predict_estimated", MULTINOMIAL)
        np.testing.assert_array_equal(same, cases.run(case, "predict_estimated"), strict=True)
    assert DRAWS[0] == MULTINOMIAL and all(check_draws(new) == new for new in STREAMS)


def edge_uniforms(table: InverseCdf) -> np.ndarray:
    """Uniforms at and next to every bucket edge and prefix sum (over ``c``), 0 and the largest
    double below 1."""
    edges = np.arange(table.U) / table.U
    at = np.clip(table.cdf / table.c, 0.0, np.nextafter(1.0, 0.0))
    u = np.concatenate([edges, at, np.nextafter(edges, 1.0), np.nextafter(at, 0.0)])
    u = np.concatenate([u, np.nextafter(at, 1.0), [0.0, np.nextafter(1.0, 0.0)]])
    return u[(u >= 0.0) & (u < 1.0)]


def searchsorted_index(table: InverseCdf, u: np.ndarray) -> np.ndarray:
    return np.minimum(np.searchsorted(table.cdf, u * table.c, side="right"), table.d - 1)


def random_law(rng: np.random.Generator, d: int, skew: float, zeros: float, trailing: int = 0):
    """A law ``q`` on ``d`` examples: uniforms to the power ``skew``, a fraction ``zeros`` of
    them zero, and the last ``trailing`` zero too (never all ``d``); one example if none is
    left."""
    q = rng.random(d) ** skew * (rng.random(d) >= zeros)
    q[d - min(trailing, d - 1) :] = 0.0
    if q.sum() == 0.0:
        q[rng.integers(0, d)] = 1.0
    return q / q.sum()


# the laws and table sizes of the index-step properties (random_law's arguments, the keys)
LAWS = dict(
    d=st.integers(1, 400),
    keys=st.integers(1, 10**6),
    skew=st.floats(0.0, 30.0),
    zeros=st.floats(0.0, 0.9),
    seed=st.integers(0, 2**32 - 1),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(**LAWS)
def test_the_index_table_is_searchsorted(d, keys, skew, zeros, seed):
    """Step 2 by the table equals ``min(searchsorted(cdf, u c, side='right'), d - 1)`` on random
    uniforms and at every edge, whatever the law (skewed, with zeros, one stored example); a
    ``q_l = 0`` is never drawn."""
    rng = np.random.default_rng(seed)
    q = random_law(rng, d, skew, zeros)
    table = InverseCdf(q, keys)
    assert table_size(d, keys) == table.U and table.U & (table.U - 1) == 0
    u = np.concatenate([rng.random(2000), edge_uniforms(table)])
    i = table(u)
    np.testing.assert_array_equal(i, searchsorted_index(table, u), strict=True)
    assert (q[i] > 0.0).all()


# ---- compiled = numpy --------------------------------------------------------------------------


@needs_numba
@settings(max_examples=200, deadline=None, derandomize=True)
@given(**LAWS, trailing=st.integers(0, 3))
def test_the_compiled_index_step_is_searchsorted(d, keys, skew, zeros, trailing, seed):
    """The compiled step 2 (``table_indices``: one comparison without a branch where a bucket
    has at most one prefix sum, the table clamped to ``d - 1``) equals ``min(searchsorted(cdf,
    u c, side='right'), d - 1)`` on random uniforms and at every edge, whatever the law (skewed,
    with zeros, zeros at its end, one stored example)."""
    from ilnrun.learners import inverse_cdf_kernels as ik

    rng = np.random.default_rng(seed)
    table = InverseCdf(random_law(rng, d, skew, zeros, trailing), keys)
    u = np.concatenate([rng.random(2000), edge_uniforms(table)])
    idx = np.full(len(u), -1, np.int64)
    first = np.minimum(table.first, table.d - 1)
    ik.table_indices(u, len(u), table.cdf, first, float(table.U), idx)
    np.testing.assert_array_equal(idx, searchsorted_index(table, u), strict=True)


@needs_numba
@streams
@pytest.mark.parametrize("case", cases.CASES, ids=IDS)
def test_compiled_coordinate_estimates_equal_numpy(case, new):
    from ilnrun.learners import inverse_cdf_kernels as ik

    alpha, X, X_eval = cases.data(case)
    runs = ik.runner(Coordinate(case[2]), X, X_eval, np.random.default_rng(1), new)
    assert runs is not None or (case[2] < 2 and new == INVERSE_CDF_V1)
    np.testing.assert_array_equal(
        cases.run(case, "predict_estimated", new), cases.run(case, "estimate_numpy", new)
    )


@needs_numba
@streams
@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_compiled_estimates_equal_numpy_for_every_map(shape, new):
    """Every compiled map (coordinate; ReLU, Fourier, random-net by ``drawn_estimates``) and a
    generator whose 32-bit half is kept before the call."""
    name, n, D, m, n_eval, chunk = shape
    alpha, X, X_eval = shape_data(name, n, D, n_eval)
    for fmap in maps(D):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        a.integers(0, 5), b.integers(0, 5)  # a kept high half of a 64-bit number
        got = two_calls("predict_estimated", alpha, X, X_eval, fmap, m, a, chunk, new)
        P = max(1, chunk // fmap.depth)  # predict_estimated's chunk for a map with a hidden layer
        want = two_calls("estimate_numpy", alpha, X, X_eval, fmap, m, b, P, new)
        np.testing.assert_array_equal(got, want, strict=True, err_msg=type(fmap).name)
        assert a.bit_generator.state == b.bit_generator.state


@needs_numba
@streams
def test_the_self_checks_pass_and_the_compiled_code_runs(new):
    from ilnrun.learners import inverse_cdf_kernels as ik

    X = np.random.default_rng(0).standard_normal((6, 4))
    for fmap, run in ((Coordinate(4), ik.coordinate), (ReLU(4), ik.generic)):
        assert ik.agrees(fmap, run, new)
        assert ik.runner(fmap, X, X, np.random.default_rng(1), new) is run
    # numpy where the compiled code does not apply: float32; inverse_cdf_v1 (which draws the
    # PCG64 numbers itself): another bit generator, D = 1; inverse_cdf_v2 runs compiled there
    mt = np.random.Generator(np.random.MT19937(1))
    X1, rng = X[:, :1], np.random.default_rng(1)
    v1 = new == INVERSE_CDF_V1
    assert (ik.runner(Coordinate(4), X, X, mt, new) is None) == v1
    assert (ik.runner(Coordinate(1), X1, X1, rng, new) is None) == v1
    assert ik.runner(Coordinate(4), X.astype(np.float32), X, rng, new) is None
    alpha = np.random.default_rng(2).standard_normal(6)
    got = KernelExpansion(alpha).predict_estimated(X, X, Coordinate(4), 9, mt, draws=new)
    mt2 = np.random.Generator(np.random.MT19937(1))
    want = KernelExpansion(alpha).estimate_numpy(X, X, Coordinate(4), 9, mt2, draws=new)
    np.testing.assert_array_equal(got, want)
    assert mt.random() == mt2.random()


@needs_numba
@streams
def test_a_disagreeing_build_runs_numpy_with_one_note(monkeypatch, capsys, new):
    from ilnrun.learners import inverse_cdf_kernels as ik

    monkeypatch.setattr(ik, "_AGREES", {})
    monkeypatch.setattr(kernels, "_NOTED", set())
    monkeypatch.setattr(ik, "agrees", lambda fmap, run, draws: False)
    X = np.random.default_rng(0).standard_normal((6, 4))
    assert ik.runner(Coordinate(4), X, X, np.random.default_rng(1), new) is None
    assert ik.runner(Coordinate(4), X, X, np.random.default_rng(1), new) is None
    err = capsys.readouterr().err
    assert err.count("numpy code runs instead") == 1 and new in err
    case = cases.CASES[2]
    run = cases.run(case, "predict_estimated", new)
    gv.assert_matches({"estimates": run}, GOLDEN[new][case[0]])


@streams
def test_zero_alpha_draws_nothing_and_costs_are_counted(new):
    X = np.random.default_rng(0).standard_normal((5, 3))
    rng = np.random.default_rng(4)
    state = rng.bit_generator.state
    p = KernelExpansion(np.zeros(5))
    assert not p.predict_estimated(X, X, Coordinate(3), 10, rng, draws=new).any()
    assert rng.bit_generator.state == state and p.costs["psi"] == 0
    p = KernelExpansion(np.array([0.0, -0.4, 0.0, 1.0, 0.0]))
    est = p.predict_estimated(X, X[:4], Coordinate(3), 10, rng, draws=new)
    assert est.shape == (4,) and p.costs["psi"] == 4 * 2 * 10


@pytest.mark.parametrize("bad", ["iid", "Multinomial", "", None, 1])
def test_an_unknown_stream_is_a_value_error(bad):
    X = np.ones((3, 2))
    p = KernelExpansion(np.ones(3))
    for method in (p.predict_estimated, p.estimate_numpy):
        with pytest.raises(ValueError, match="inverse_cdf_v1"):
            method(X, X, Coordinate(2), 5, np.random.default_rng(0), draws=bad)
    assert p.costs["psi"] == 0


# ---- the law -----------------------------------------------------------------------------------


def coordinate_law(alpha, X, x):
    """Every value of one sample ``Z = |alpha|_1 sgn(alpha_i) x_i[w] x[w]`` of Algorithm 2 with
    coordinate features and its probability ``q_i / D``: ``(values, probabilities)``."""
    absa = np.abs(alpha)
    total = absa.sum()
    values = total * np.sign(alpha)[:, None] * X[: len(alpha)] * x[None, :]
    probs = (absa / total)[:, None] * np.full_like(values, 1.0 / X.shape[1])
    return values.ravel(), probs.ravel()


def mean_moments(values, probs, m):
    """Mean, variance and fourth central moment of the mean of ``m`` iid samples of the
    discrete law, exactly (from the sample's own: ``mu4 = (k4 + 3 (m - 1) s^4) / m^3``)."""
    mu = float(np.dot(probs, values))
    var1 = float(np.dot(probs, (values - mu) ** 2))
    k4 = float(np.dot(probs, (values - mu) ** 4))
    return mu, var1 / m, (k4 + 3 * (m - 1) * var1**2) / m**3


def var_se(var, mu4, n):
    """Standard error of the sample variance (``n - 1`` in the denominator) of ``n`` iid draws
    with variance ``var`` and fourth central moment ``mu4``."""
    return math.sqrt((mu4 - (n - 3) / (n - 1) * var**2) / n)


def replicate(alpha, X, points, fmap, m, draws, seeds, copies):
    """``len(seeds) * copies`` independent estimates of every point (``(R, points)``): every row
    of a call draws its own samples, and every seed is a call."""
    rows = np.repeat(points, copies, axis=0)
    out = []
    for s in seeds:
        est = KernelExpansion(alpha).predict_estimated(
            X, rows, fmap, m, np.random.default_rng(s), draws=draws
        )
        out.append(est.reshape(len(points), copies).T)
    return np.concatenate(out)


def law_setting(D: int = 25, n: int = 40, n_points: int = 6):
    """A fixed alpha (skewed, with zeros and both signs), stored rows and eval points."""
    rng = np.random.default_rng(11)
    X = np.maximum(rng.standard_normal((n, D)), 0.0)
    alpha = rng.standard_normal(n) * 0.3 ** rng.integers(0, 4, n)
    alpha[[2, 9, 17]] = 0.0
    return alpha, X, np.maximum(rng.standard_normal((n_points, D)), 0.0)


@streams
def test_the_stream_has_algorithm_2s_mean_and_variance(new):
    """Coordinate features, R = 4 000 estimates a point with m = 64: the mean within Z standard
    errors of the exact ``sum_i alpha_i x_i . x / D`` (its error ``sqrt(Var(E) / R)``, exact),
    and the sample variance within Z standard errors of the exact ``Var(E) = Var(Z) / m``
    (the error of a sample variance from the fourth moment of ``E``, exact too)."""
    alpha, X, points = law_setting()
    m, R = 64, 4000
    est = replicate(alpha, X, points, Coordinate(X.shape[1]), m, new, range(4), R // 4)
    for p, x in enumerate(points):
        values, probs = coordinate_law(alpha, X, x)
        mu, var, mu4 = mean_moments(values, probs, m)
        assert mu == pytest.approx(float(alpha @ X @ x) / X.shape[1], rel=1e-12)
        z_mean = (est[:, p].mean() - mu) / math.sqrt(var / R)
        z_var = (est[:, p].var(ddof=1) - var) / var_se(var, mu4, R)
        assert abs(z_mean) < Z and abs(z_var) < Z, (p, z_mean, z_var)


@streams
def test_the_stream_agrees_with_the_multinomial_stream(new):
    """Two samples of R = 4 000 estimates a point, the stream and ``multinomial`` (other
    seeds): their means differ by less than Z standard errors of the difference (``sqrt(2
    Var(E) / R)``), their variances by less than Z standard errors of the difference of two
    sample variances."""
    alpha, X, points = law_setting()
    m, R = 64, 4000
    fmap = Coordinate(X.shape[1])
    est = replicate(alpha, X, points, fmap, m, new, range(4), R // 4)
    old = replicate(alpha, X, points, fmap, m, MULTINOMIAL, range(10, 14), R // 4)
    for p, x in enumerate(points):
        _, var, mu4 = mean_moments(*coordinate_law(alpha, X, x), m)
        z_mean = (est[:, p].mean() - old[:, p].mean()) / math.sqrt(2 * var / R)
        dvar = est[:, p].var(ddof=1) - old[:, p].var(ddof=1)
        z_var = dvar / (math.sqrt(2) * var_se(var, mu4, R))
        assert abs(z_mean) < Z and abs(z_var) < Z, (p, z_mean, z_var)


@streams
def test_the_relu_stream_estimates_the_arc_cosine_kernel(new):
    """ReLU features (the compiled ``drawn_estimates`` where numba runs): the mean of R = 3 000
    estimates a point within Z standard errors (from the sample) of the exact
    ``sum_i alpha_i k(x_i, x)``, and the two streams' means and variances within Z standard
    errors of their differences (the variance's from the samples' fourth moments)."""
    alpha, X, points = law_setting(D=8, n=30, n_points=4)
    fmap, m, R = ReLU(8), 32, 3000
    exact = fmap.kernel(points, X[: len(alpha)]) @ alpha
    est = replicate(alpha, X, points, fmap, m, new, range(3), R // 3)
    old = replicate(alpha, X, points, fmap, m, MULTINOMIAL, range(10, 13), R // 3)
    for p in range(len(points)):
        a, b = est[:, p], old[:, p]
        assert abs(a.mean() - exact[p]) < Z * a.std(ddof=1) / math.sqrt(R), p
        z_mean = (a.mean() - b.mean()) / math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / R)
        se_var = [var_se(v.var(ddof=1), np.mean((v - v.mean()) ** 4), R) for v in (a, b)]
        z_var = (a.var(ddof=1) - b.var(ddof=1)) / math.hypot(*se_var)
        assert abs(z_mean) < Z and abs(z_var) < Z, (p, z_mean, z_var)


def chi2_p(counts: np.ndarray, q: np.ndarray) -> float:
    """The p-value of ``counts`` against the law ``q`` (chi-square; cells with an expected count
    below 5 pooled)."""
    expected = counts.sum() * q
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0.0:
        obs, exp = obs[:-1], exp[:-1]
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    return float(stats.chi2.sf(chi2, len(obs) - 1))


def uniforms(new: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``n`` uniforms of step 2 as the stream makes them and (``inverse_cdf_v2``) the lower 32
    bits of the same numbers."""
    if new == INVERSE_CDF_V1:
        return np.random.default_rng(seed).random(n), None
    z = estimate_draws.splitmix64(
        np.random.default_rng(seed).integers(0, 2**64, dtype=np.uint64), 0, n
    )
    return estimate_draws.upper_uniforms(z), z & estimate_draws.LOW32


@streams
def test_the_indices_are_drawn_with_q(new):
    """Step 2 on 400 000 of the stream's uniforms: the frequency of every stored example against
    ``q`` (chi-square), p-value above 1e-6; and never an example with ``q_l = 0``. With
    ``inverse_cdf_v2``, the coordinates made from the same numbers' lower halves (``D = 25``)
    against uniform, and the pairs ``(i, w)`` against ``q_i / D`` (their independence)."""
    alpha, _, _ = law_setting()
    absa = np.abs(alpha)
    q = absa / absa.sum()
    table = InverseCdf(q, 400_000)
    u, low = uniforms(new, 400_000, 8)
    i = table(u)
    counts = np.bincount(i, minlength=len(q))
    assert (counts[q == 0.0] == 0).all()
    assert chi2_p(counts, q) > 1e-6
    if low is not None:
        D = 25
        w = Coordinate(D).sample_bits(low)
        assert chi2_p(np.bincount(w, minlength=D), np.full(D, 1.0 / D)) > 1e-6
        pairs = np.bincount(i * D + w, minlength=len(q) * D)
        assert chi2_p(pairs, np.repeat(q, D) / D) > 1e-6


# ---- the config key ----------------------------------------------------------------------------


def small_config(**evaluation) -> dict:
    from conftest import tiny_config

    cfg = tiny_config()
    cfg["dataset"]["D"] = 20
    cfg["repetitions"] = 1
    cfg["evaluation"] = {"m_test": 40, "curve_points": 5, **evaluation}
    return cfg


def test_the_default_is_not_stored_and_changes_no_cell_or_digest():
    plain = C.resolve(small_config())
    spelled = C.resolve(small_config(estimate_draws=MULTINOMIAL))
    assert plain.as_dict() == spelled.as_dict()
    assert "estimate_draws" not in plain.as_dict()["evaluation"]
    assert plain.evaluation.estimate_draws == MULTINOMIAL
    for a, b in zip(C.cells(plain), C.cells(spelled), strict=True):
        assert a.id == b.id and C.record_digest(plain, a) == C.record_digest(spelled, b)


def test_another_stream_is_recorded_and_changes_every_digest_not_the_cells():
    """Set, the key is in the resolved config and in every record's digest (a results directory
    of another stream is not resumed); the cells, their ids and seeds (the training pass) stay
    the same."""
    plain = C.resolve(small_config())
    digests = {}
    for draws in STREAMS:
        new = C.resolve(small_config(estimate_draws=draws))
        assert new.as_dict()["evaluation"]["estimate_draws"] == draws
        assert new.evaluation.estimate_draws == draws
        for a, b in zip(C.cells(plain), C.cells(new), strict=True):
            assert a.id == b.id and a.seed_key == b.seed_key
            digests.setdefault(a.id, {C.record_digest(plain, a)}).add(C.record_digest(new, b))
    assert all(len(d) == 1 + len(STREAMS) for d in digests.values())


@pytest.mark.parametrize("kernel", ["exact", "free"])
def test_only_the_algorithm_2_columns_move(kernel):
    """A cell run with each stream: the training pass and every exact column are equal; the
    Algorithm-2 columns (``test_loss_estimated``, ``val_loss_estimated``, the ``m_test_sweep``
    column; under ``kernel: free`` also the scored losses) differ, and are close."""
    from ilnrun.cell import run_cell, sweep_column

    rows = {}
    for draws in DRAWS:
        cfg = small_config(estimate_draws=draws, m_test_sweep=[30], kernel=kernel)
        del cfg["methods"]["kernel_ogd"]  # (it needs the kernel)
        exp = C.resolve(cfg)
        cell = next(c for c in C.cells(exp) if c.method == "shrinking_gradient")
        rows[draws] = run_cell(exp, cell)["row"]
    old = rows[MULTINOMIAL]
    moved = {"test_loss_estimated", "val_loss_estimated", "test_nmse_estimated", sweep_column(30)}
    if kernel == "free":
        moved |= {"val_loss", "test_loss", "test_nmse", "test_loss_subset", "test_loss_avg"}
    for new in (rows[s] for s in STREAMS):
        for key in old:
            if key in ("wall_s", "eval_s"):
                continue
            if key in moved:
                assert old[key] != new[key] and new[key] == pytest.approx(old[key], rel=0.5), key
            else:
                assert old[key] == new[key] or (old[key] != old[key] and new[key] != new[key]), key


def test_a_run_with_the_stream_and_its_resume(tmp_path):
    """``--set evaluation.estimate_draws=inverse_cdf_v2`` runs; the same command resumes; the
    config without it, or with another stream, is refused there, naming the key (exit 2), and
    ``--extend`` runs every cell again (their digests differ: no record of another stream is
    kept)."""
    from conftest import invoke, refused, write_config

    path = write_config(tmp_path / "c.yaml", small_config())
    out = tmp_path / "out"
    res = invoke(["run", path, "--out", out, "-q", "--set", f"evaluation.estimate_draws={NEW}"])
    assert res.exit_code == 0, res.output
    res = invoke(["run", path, "--out", out, "--set", f"evaluation.estimate_draws={NEW}"])
    assert res.exit_code == 0 and "resumed" in res.output, res.output
    refused(invoke(["run", path, "--out", out, "-q"]), "evaluation.estimate_draws")
    other = ["--set", f"evaluation.estimate_draws={INVERSE_CDF_V1}"]
    refused(invoke(["run", path, "--out", out, "-q", *other]), "evaluation.estimate_draws")
    res = invoke(["run", path, "--out", out, "--extend"])
    assert res.exit_code == 0 and "(0 resumed)" in res.output, res.output


def test_a_cell_of_the_stream_is_reproduced_from_python(tmp_path):
    """``ilnrun.load(R).cell(id)``: the estimator of a cell run with ``inverse_cdf_v2`` takes
    the stream, so its Algorithm-2 test loss and the whole row come back bit for bit."""
    from conftest import invoke, write_config

    import ilnrun

    path = write_config(tmp_path / "c.yaml", small_config(estimate_draws=NEW))
    res = invoke(["run", path, "--out", tmp_path / "out", "-q"])
    assert res.exit_code == 0, res.output
    loaded = ilnrun.load(tmp_path / "out")
    sg = loaded.runs[loaded.runs["method"] == "shrinking_gradient"]
    c = loaded.cell(sg["cell_id"].iloc[0])
    est = c.estimator().fit(c.X_train, c.y_train)
    assert est.get_params()["estimate_draws"] == NEW
    n = min(200, len(c.y_test))
    est.set_params(predict_mode="estimated")
    alg2 = float(0.5 * np.mean((est.predict(c.X_test[:n]) - c.y_test[:n]) ** 2))
    assert alg2 == c.row["test_loss_estimated"]
    est.set_params(predict_mode="exact")
    assert c.differences(est) == {}


def test_validate_counts_the_cheaper_stream():
    """``ilnrun validate``'s seconds: the Algorithm-2 part at the stream's measured weight."""
    from ilnrun import cost

    def sg_seconds(**evaluation) -> float:
        work = cost.Workload.of(C.resolve(small_config(**evaluation)))
        return max(e.seconds for e in cost.estimates(work) if e.method == "shrinking_gradient")

    assert cost.ESTIMATE_DRAW_WEIGHT[MULTINOMIAL] == 4
    assert set(cost.ESTIMATE_DRAW_WEIGHT) == set(DRAWS)
    v1, v2 = (sg_seconds(estimate_draws=s) for s in STREAMS)
    assert v2 < v1 < sg_seconds()


def test_the_estimator_takes_the_stream():
    from ilnrun.estimators import ShrinkingGradientRegressor

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 5)), rng.uniform(-1, 1, 40)
    kw = dict(feature_map="coordinate", predict_mode="estimated", m_test=20_000, random_state=3)
    old = ShrinkingGradientRegressor(**kw).fit(X, y)
    new = ShrinkingGradientRegressor(estimate_draws=NEW, **kw).fit(X, y)
    exact = ShrinkingGradientRegressor(**{**kw, "predict_mode": "exact"}).fit(X, y)
    assert old.get_params()["estimate_draws"] == MULTINOMIAL
    np.testing.assert_array_equal(old.online_losses_, new.online_losses_)
    a, b = old.predict(X[:10]), new.predict(X[:10])
    # the same pass, other draws: both near the exact predictions (measured within 0.04)
    assert not np.array_equal(a, b) and np.allclose(b, exact.predict(X[:10]), atol=0.2)
    with pytest.raises(ValueError, match="estimate_draws"):
        ShrinkingGradientRegressor(estimate_draws="iid", **kw).fit(X, y)


def test_architecture_keeps_the_stream_names_in_one_place():
    """The streams are named in ``estimate_draws`` (and the config's choices come from there)."""
    from ilnrun.config.keys import ESTIMATE_DRAWS

    assert ESTIMATE_DRAWS.choices == DRAWS and ESTIMATE_DRAWS.default == MULTINOMIAL
    assert base.MULTINOMIAL == MULTINOMIAL
