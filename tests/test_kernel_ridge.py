"""The batch reference: kernel ridge regression equals scikit-learn's KernelRidge on the same
precomputed kernel, and its per-round losses are exact leave-one-out losses."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_data

from ilnrun.features import build_feature_map
from ilnrun.learners import LEARNERS

SPEC = next(s for s in LEARNERS.values() if s.short == "KRR")


@pytest.mark.parametrize("kind", ["relu", "fourier"])
def test_kernel_ridge_equals_sklearn_kernel_ridge(kind):
    sk = pytest.importorskip("sklearn.kernel_ridge")
    d = make_data(D=8, T=60)
    fmap = build_feature_map({"kind": kind}, d.X_train)
    ridge = 1e-2
    res = SPEC.fit(d.X_train, d.y_train, fmap, np.random.default_rng(0), ridge=ridge)
    K = fmap.kernel(d.X_train, d.X_train)
    ref = sk.KernelRidge(alpha=len(d.y_train) * ridge, kernel="precomputed").fit(K, d.y_train)
    K_test = fmap.kernel(d.X_test, d.X_train)
    np.testing.assert_allclose(
        res.predictor.predict_exact(K_test), ref.predict(K_test), rtol=1e-8, atol=1e-10
    )
    assert res.counters["kernel_evals"] == 60 * 60


def test_kernel_ridge_losses_are_leave_one_out():
    d = make_data(D=8, T=25)
    fmap = build_feature_map({"kind": "relu"}, d.X_train)
    X, y, T, ridge = d.X_train, d.y_train, 25, 0.05
    res = SPEC.fit(X, y, fmap, np.random.default_rng(0), ridge=ridge)
    K = fmap.kernel(X, X)
    for t in (0, 7, 24):
        keep = np.arange(T) != t
        # the fit on T - 1 points with the same penalty matrix K + T ridge I restricted
        a = np.linalg.solve(K[np.ix_(keep, keep)] + T * ridge * np.eye(T - 1), y[keep])
        assert res.losses[t] == pytest.approx(0.5 * (K[t, keep] @ a - y[t]) ** 2, rel=1e-8)
