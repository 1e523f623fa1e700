"""The performance paths give the same numbers, bit for bit, as the plain ones they replace:
Shrinking Gradient's sorted search of the m keys, Algorithm 2 at test time for coordinate
features (flat gathers, signs folded in, cache-sized blocks), and Doubly SGD's skipped exact
divisions."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_data

from ilnrun.features import Coordinate, ReLU
from ilnrun.learners import base, doubly_sgd, shrinking_gradient
from ilnrun.learners.base import KernelExpansion
from ilnrun.learners.shrinking_gradient import draw_indices


@pytest.mark.parametrize("m,t", [(1, 1), (600, 1), (600, 700), (2000, 513), (511, 5000)])
def test_draw_indices_equals_searchsorted(m, t):
    """Random keys, keys equal to a cumulative sum, repeated keys, flat segments (zero weights)
    and keys at or past the end: the sorted search returns searchsorted's indices in draw order."""
    rng = np.random.default_rng(m + t)
    w = rng.random(t)
    w[rng.random(t) < 0.2] = 0.0  # shrink rounds append zero weights
    cum = np.cumsum(w)
    keys = rng.random(m) * cum[-1]
    keys[: m // 10] = cum[rng.integers(0, t, m // 10)]  # ties with the sums
    keys[m // 10 : m // 5] = keys[0]  # repeated keys
    keys[-1] = cum[-1]  # at the end (u * total rounded up to total)
    i, order, i_sorted = draw_indices(cum, keys)
    np.testing.assert_array_equal(i, cum.searchsorted(keys, side="right"))
    if order is not None:
        np.testing.assert_array_equal(i_sorted, i[order])
        assert np.all(np.diff(i_sorted) >= 0)
    ordered = np.sort(keys)
    np.testing.assert_array_equal(
        draw_indices(cum, ordered, keys_sorted=True)[0], cum.searchsorted(ordered, side="right")
    )


def _fit_fields(res) -> list[np.ndarray]:
    return [res.losses, res.predictor.alpha, res.averaged.alpha, res.extras["alpha_l1"]]


@pytest.mark.parametrize("sampler", ["iid", "systematic"])
def test_sorted_search_changes_no_result(monkeypatch, sampler):
    """A whole pass with the sorted search always on equals the pass with it always off."""
    d = make_data(seed=4, D=30, T=400, n_test=1)
    kw = dict(eta=0.5, m=64, B=0.02, sampler=sampler, schedule="inv_sqrt")  # shrinks happen
    fmap = Coordinate(30)
    monkeypatch.setattr(shrinking_gradient, "SORTED_SEARCH_FROM", 10**9)
    plain = shrinking_gradient.fit(d.X_train, d.y_train, fmap, np.random.default_rng(1), **kw)
    monkeypatch.setattr(shrinking_gradient, "SORTED_SEARCH_FROM", 1)
    fast = shrinking_gradient.fit(d.X_train, d.y_train, fmap, np.random.default_rng(1), **kw)
    assert plain.counters == fast.counters and plain.counters["shrinks"] > 0
    for a, b in zip(_fit_fields(plain), _fit_fields(fast), strict=True):
        np.testing.assert_array_equal(a, b)


def _estimates(alpha, d, fmap, m, monkeypatch, fast: bool, **kw) -> np.ndarray:
    if not fast:
        monkeypatch.setattr(base._CoordinateProducts, "make", classmethod(lambda *a: None))
    try:
        return KernelExpansion(alpha).predict_estimated(
            d.X_train, d.X_test, fmap, m, np.random.default_rng(9), **kw
        )
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize(
    "T,n_alpha,chunk_pairs,block_pairs",
    [
        (30, 30, 1 << 20, 1 << 14),  # signed copy of the stored rows (few rows)
        (400, 380, 1 << 20, 1 << 14),  # signs gathered per draw (many rows; alpha shorter than X)
        (400, 400, 700, 64),  # several chunks, blocks smaller than a row, ragged last block
    ],
)
def test_coordinate_estimates_equal_the_generic_path(
    monkeypatch, T, n_alpha, chunk_pairs, block_pairs
):
    d = make_data(seed=2, D=20, T=T, n_test=57)
    rng = np.random.default_rng(3)
    alpha = rng.standard_normal(n_alpha)
    alpha[rng.random(n_alpha) < 0.3] = 0.0
    fmap = Coordinate(20)
    generic = _estimates(alpha, d, fmap, 41, monkeypatch, False, chunk_pairs=chunk_pairs)
    monkeypatch.setattr(base, "BLOCK_PAIRS", block_pairs)
    fast = _estimates(alpha, d, fmap, 41, monkeypatch, True, chunk_pairs=chunk_pairs)
    np.testing.assert_array_equal(fast, generic)


def test_estimates_fall_back_for_other_maps_and_strided_inputs():
    d = make_data(seed=2, D=20, T=60, n_test=40)
    alpha = np.random.default_rng(3).standard_normal(60)
    assert base._CoordinateProducts.make(ReLU(20), d.X_train, d.X_test, np.sign(alpha), 1) is None
    strided = d.X_test[:, ::2]
    assert (
        base._CoordinateProducts.make(Coordinate(10), d.X_train, strided, np.sign(alpha), 1) is None
    )
    est = KernelExpansion(alpha).predict_estimated(
        d.X_train[:, ::2], strided, Coordinate(10), 30, np.random.default_rng(0)
    )
    assert est.shape == (40,) and np.isfinite(est).all()


@pytest.mark.parametrize("k,nu", [(1, 0.0), (1, 0.2), (3, 0.0)])
def test_doubly_sgd_skipped_divisions_change_nothing(k, nu):
    """k = 1 skips the division by k and nu = 0 (scale 1) the division by the scale; both are
    exact, so the pass equals one that always divides."""
    d = make_data(seed=5, D=10, T=80, n_test=1)
    fmap = Coordinate(10)
    res = doubly_sgd.fit(d.X_train, d.y_train, fmap, np.random.default_rng(2), eta=0.3, k=k, nu=nu)
    rng = np.random.default_rng(2)
    W, c, s = np.empty(0, dtype=np.int64), np.empty(0), 1.0
    for t in range(len(d.y_train)):
        f = s * float(c @ fmap.point(d.X_train[t], W)) if len(W) else 0.0
        omega = fmap.sample(rng, k)
        new = np.divide(-0.3 * (f - d.y_train[t]) * fmap.point(d.X_train[t], omega), k)
        s *= 1.0 - 0.3 * nu
        W, c = np.concatenate([W, omega]), np.concatenate([c, np.divide(new, s)])
    np.testing.assert_array_equal(res.predictor.W, W)
    np.testing.assert_array_equal(res.predictor.coef, s * c)
