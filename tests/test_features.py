"""Feature maps: evaluation methods agree, and each closed-form kernel is E_w[psi psi']."""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.datasets import clipped_gaussian
from ilnrun.features import (
    FEATURE_MAPS,
    Coordinate,
    FeatureMap,
    Fourier,
    ReLU,
    build_feature_map,
    median_distance,
)
from ilnrun.learners.base import FeatureExpansion

D_IN = 5


def _inputs(seed: int = 0, n: int = 6, d: int = D_IN) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)) * 0.7


def _maps(d: int = D_IN) -> list:
    """Every registered feature map, built from its config defaults on sample inputs (so a new
    map is tested without editing this file)."""
    return [build_feature_map({"kind": name}, _inputs(0, 40, d)) for name in FEATURE_MAPS]


def test_coordinate_average_over_all_coordinates_is_the_kernel_exactly():
    X1, X2 = _inputs(1, 7, 11), _inputs(2, 4, 11)
    fmap = Coordinate(11)
    every = np.arange(11)
    # (1/D) sum_w psi(x; w) psi(x'; w) over the D equally likely coordinates is the expectation.
    avg = fmap.matrix(X1, every) @ fmap.matrix(X2, every).T / 11
    np.testing.assert_allclose(avg, fmap.kernel(X1, X2), rtol=1e-13, atol=1e-15)
    # and the kernel is the stated closed form x . x' / D
    np.testing.assert_allclose(fmap.kernel(X1, X2), X1 @ X2.T / 11, rtol=1e-13)


@pytest.mark.parametrize("fmap", _maps(), ids=lambda f: f.name)
def test_pairs_point_matrix_agree(fmap):
    rng = np.random.default_rng(3)
    X = _inputs(4)
    W = fmap.sample(rng, 9)
    M = fmap.matrix(X, W)
    assert M.shape == (len(X), len(W))
    for a in range(len(X)):
        np.testing.assert_allclose(fmap.point(X[a], W), M[a], rtol=1e-13, atol=1e-13)
    rows = rng.integers(0, len(X), size=len(W))
    np.testing.assert_allclose(
        fmap.pairs(X, rows, W), M[rows, np.arange(len(W))], rtol=1e-13, atol=1e-13
    )


@pytest.mark.parametrize("fmap", _maps(), ids=lambda f: f.name)
def test_sample_shapes_and_ranges(fmap):
    W = fmap.sample(np.random.default_rng(0), 1000)
    assert len(W) == 1000
    if isinstance(fmap, Coordinate):
        assert W.min() >= 0 and W.max() < D_IN
        assert np.issubdtype(W.dtype, np.integer)
    if isinstance(fmap, Fourier):
        assert W.shape == (1000, D_IN + 1)
        assert W[:, -1].min() >= 0.0 and W[:, -1].max() < 2 * np.pi


def test_kernel_special_values():
    X = _inputs(5)
    # relu: k(x, x) = |x|^2 (theta = 0); fourier: k(x, x) = 1
    np.testing.assert_allclose(np.diag(ReLU(D_IN).kernel(X, X)), np.sum(X**2, axis=1), rtol=1e-6)
    np.testing.assert_allclose(np.diag(Fourier(D_IN, 1.3).kernel(X, X)), 1.0, rtol=1e-12)
    # relu for opposite inputs: theta = pi -> k = 0
    np.testing.assert_allclose(ReLU(D_IN).kernel(X[:1], -X[:1]), 0.0, atol=1e-12)
    # relu for orthogonal inputs: theta = pi/2 -> k = |x||x'| / pi
    e1, e2 = np.eye(D_IN)[:1] * 2.0, np.eye(D_IN)[1:2] * 3.0
    np.testing.assert_allclose(ReLU(D_IN).kernel(e1, e2), 6.0 / np.pi, rtol=1e-12)


PAIRS = [(0, 0), (0, 1), (2, 3), (4, 5)]  # includes x == x'


def _check_monte_carlo_mean(v: np.ndarray, k: float, scale: float) -> None:
    """The mean of the draws ``v = psi(x;w) psi(x';w)`` is within 4 standard errors of ``k``
    (the standard error from the draws themselves, sample std / sqrt(n)) and the check has
    power (the standard error is below 2% of the kernel's scale ``scale``). Draws with zero
    variance (psi(x;.) psi(x';.) constant in w, e.g. a constant map) have an exact mean: it must
    equal ``k`` up to rounding."""
    se = v.std(ddof=1) / np.sqrt(len(v))
    if se == 0:
        assert v.mean() == pytest.approx(k, rel=1e-12, abs=1e-12), (v[0], k)
        return
    assert abs(v.mean() - k) <= 4 * se, (v.mean(), k, se)
    assert se < 0.02 * scale


@pytest.mark.parametrize("fmap", [f for f in _maps() if f.has_kernel], ids=lambda f: f.name)
def test_monte_carlo_mean_matches_closed_form_kernel(fmap):
    """The Monte Carlo mean of psi(x;w) psi(x';w) over n iid w matches k(x, x') (see
    :func:`_check_monte_carlo_mean`; every map with a closed-form kernel)."""
    n = 200_000
    X = _inputs(6)
    X[5] = -0.5 * X[4] + 0.6 * X[3]  # an obtuse pair
    K = fmap.kernel(X, X)
    W = fmap.sample(np.random.default_rng(11), n)
    Psi = {a: fmap.point(X[a], W) for a in {p for pair in PAIRS for p in pair}}
    for a, b in PAIRS:
        v = Psi[a] * Psi[b]
        _check_monte_carlo_mean(v, K[a, b], np.sqrt(K[a, a] * K[b, b]))


class _Constant(FeatureMap):
    """psi(x; w) = c for every w: a map whose psi has zero variance (k(x, x') = c^2)."""

    name = "constant"

    def __init__(self, d: int, c: float = 0.5) -> None:
        super().__init__(d)
        self.c = c

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.d))

    def pairs(self, X: np.ndarray, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
        return np.full(len(W), self.c)

    def matrix(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return np.full((len(X), len(W)), self.c)

    def kernel(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        return np.full((len(X1), len(X2)), self.c**2)


def test_monte_carlo_check_accepts_a_zero_variance_map_and_still_has_teeth():
    """A map whose psi does not vary with w passes the kernel check exactly; a wrong kernel for
    it (or for a varying map) still fails."""
    fmap = _Constant(D_IN)
    X = _inputs(6)
    W = fmap.sample(np.random.default_rng(11), 1000)
    K = fmap.kernel(X, X)
    for a, b in PAIRS:
        _check_monte_carlo_mean(fmap.point(X[a], W) * fmap.point(X[b], W), K[a, b], K[a, a])
    with pytest.raises(AssertionError):
        _check_monte_carlo_mean(fmap.point(X[0], W) ** 2, 1.01 * K[0, 0], K[0, 0])
    relu = build_feature_map({"kind": "relu"}, _inputs(0, 40))
    v = relu.point(X[0], relu.sample(np.random.default_rng(1), 200_000)) ** 2
    with pytest.raises(AssertionError):
        _check_monte_carlo_mean(v, 1.1 * relu.kernel(X[:1], X[:1])[0, 0], 1.0)


def test_coordinate_monte_carlo_is_unbiased_too():
    """Same check for the coordinate map (4 standard errors, computed from the draws)."""
    n = 200_000
    fmap = Coordinate(8)
    X = _inputs(7, 3, 8)
    W = fmap.sample(np.random.default_rng(2), n)
    K = fmap.kernel(X, X)
    for a, b in [(0, 1), (1, 1), (0, 2)]:
        v = fmap.point(X[a], W) * fmap.point(X[b], W)
        _check_monte_carlo_mean(v, K[a, b], np.sqrt(K[a, a] * K[b, b]))


def test_build_feature_map_and_median_rule():
    X = clipped_gaussian(np.random.default_rng(0), D=6, T=40, n_val=1, n_test=1, sparsity=2).X_train
    assert isinstance(build_feature_map({"kind": "coordinate"}, X), Coordinate)
    assert isinstance(build_feature_map({"kind": "relu"}, X), ReLU)
    f = build_feature_map({"kind": "fourier", "sigma": "median"}, X)
    assert f.sigma == pytest.approx(median_distance(X)) and f.sigma_rule == "median"
    # median_distance is the median over distinct pairs (brute force)
    dists = [np.linalg.norm(X[i] - X[j]) for i in range(len(X)) for j in range(i + 1, len(X))]
    # (rel 1e-5: the code takes the median of squared distances computed by expansion)
    assert median_distance(X) == pytest.approx(np.median(dists), rel=1e-5)
    g = build_feature_map({"kind": "fourier", "sigma": 2.0}, X)
    assert g.sigma == 2.0 and g.sigma_rule == "given"
    with pytest.raises(ValueError):
        build_feature_map({"kind": "nope"}, X)


@pytest.mark.parametrize("fmap", _maps(), ids=lambda f: f.name)
def test_feature_expansion_prediction_is_sum_of_features(fmap):
    """``FeatureExpansion.predict``: ``f(x) = sum_j c_j psi(x; w_j)`` (the prediction of Doubly
    SGD and Fixed-Random), including repeated parameters and an empty expansion."""
    rng = np.random.default_rng(8)
    X = _inputs(9, 12)
    W = fmap.sample(rng, 17)
    W = np.concatenate([W, W[:3]])  # repeated parameters (coordinates repeat in practice)
    coef = rng.standard_normal(len(W))
    expected = np.array(
        [sum(coef[j] * fmap.point(x, W[j : j + 1])[0] for j in range(len(W))) for x in X]
    )
    got = FeatureExpansion(W, coef, fmap).predict(X)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    empty = FeatureExpansion(fmap.sample(rng, 0), np.zeros(0), fmap).predict(X)
    np.testing.assert_array_equal(empty, np.zeros(len(X)))
