"""The scalable batch reference: Nyström kernel ridge regression (scikit-learn ``Nystroem`` on the
feature map's own kernel, then ``Ridge``). With every training row a landmark it is exact kernel
ridge regression; its losses are the ridge stage's leave-one-out losses; its memory estimate
bounds what it allocates; it runs through validate -> run -> plot -> report and as an
estimator."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, make_data, tiny_config, write_config

from ilnrun.estimators import KernelRidgeRegressor, NystroemRidgeRegressor
from ilnrun.features import build_feature_map
from ilnrun.learners import LEARNERS

SPEC = LEARNERS["nystroem_ridge"]
KRR = LEARNERS["kernel_ridge"]


@pytest.mark.parametrize("kind", ["relu", "fourier"])
def test_all_rows_as_landmarks_is_kernel_ridge(kind):
    """rank >= T: the Nyström kernel K_TL K_LL^-1 K_LT is K itself, so predictions and the
    leave-one-out losses equal exact kernel ridge regression's (to the rounding of a
    well-conditioned solve; measured ~1e-14)."""
    d = make_data(D=8, T=40)
    fmap = build_feature_map({"kind": kind}, d.X_train)
    exact = KRR.fit(d.X_train, d.y_train, fmap, None, ridge=1e-2)
    nys = SPEC.fit(d.X_train, d.y_train, fmap, np.random.default_rng(0), rank=1000, ridge=1e-2)
    want = exact.predictor.predict_exact(fmap.kernel(d.X_test, d.X_train))
    np.testing.assert_allclose(nys.predictor.predict(d.X_test), want, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(nys.losses, exact.losses, rtol=1e-8)
    assert nys.counters["kernel_evals"] == 40 * 40 + 40 * 40


def test_it_is_sklearn_nystroem_then_ridge_on_the_maps_kernel():
    """The predictor equals scikit-learn's pipeline on the same landmarks and the same kernel
    (rank < T), and the leave-one-out losses equal refits of Ridge without each row."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge

    d = make_data(D=8, T=60)
    X, y, T, r, ridge = d.X_train, d.y_train, 60, 12, 1e-2
    fmap = build_feature_map({"kind": "fourier", "sigma": 1.5}, X)
    res = SPEC.fit(X, y, fmap, np.random.default_rng(3), rank=r, ridge=ridge)
    L = X[res.extras["landmarks"]]
    assert len(set(res.extras["landmarks"])) == r
    nys = Nystroem(kernel="precomputed", n_components=r, random_state=1).fit(fmap.kernel(L, L))
    Z = nys.transform(fmap.kernel(X, L))
    model = Ridge(alpha=T * ridge, fit_intercept=False).fit(Z, y)
    Z_test = nys.transform(fmap.kernel(d.X_test, L))
    np.testing.assert_allclose(res.predictor.predict(d.X_test), model.predict(Z_test), rtol=1e-9)
    assert res.counters["kernel_evals"] == r * r + T * r
    for t in (0, 31, 59):
        keep = np.arange(T) != t
        loo = Ridge(alpha=T * ridge, fit_intercept=False).fit(Z[keep], y[keep])
        want = 0.5 * (loo.predict(Z[t : t + 1])[0] - y[t]) ** 2
        assert res.losses[t] == pytest.approx(want, rel=1e-8)


def test_more_landmarks_approach_kernel_ridge():
    """The distance of the predictions to exact kernel ridge regression's falls as the rank
    grows (5 -> 20 -> 80 of T = 80 rows, the same draws nested by the generator)."""
    d = make_data(D=8, T=80)
    fmap = build_feature_map({"kind": "relu"}, d.X_train)
    want = KRR.fit(d.X_train, d.y_train, fmap, None, ridge=1e-2).predictor.predict_exact(
        fmap.kernel(d.X_test, d.X_train)
    )
    gaps = []
    for r in (5, 20, 80):
        res = SPEC.fit(d.X_train, d.y_train, fmap, np.random.default_rng(0), rank=r, ridge=1e-2)
        gaps.append(float(np.max(np.abs(res.predictor.predict(d.X_test) - want))))
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-8


def test_memory_estimate_bounds_the_allocations():
    """The memory hook (O(T rank)) is above what the fit allocates (numpy arrays, traced) and
    not more than twice it, at two sizes."""
    rng = np.random.default_rng(0)
    SPEC.fit(
        np.ones((5, 2)),
        np.ones(5),
        build_feature_map({"kind": "relu"}, np.ones((5, 2))),
        rng,
        rank=2,
    )  # imports first (their allocations are not the fit's)
    for T, r in ((6000, 150), (6000, 300)):
        X = rng.standard_normal((T, 6))
        fmap = build_feature_map({"kind": "fourier", "sigma": 2.0}, X)
        tracemalloc.start()
        SPEC.fit(X, np.tanh(X[:, 0]), fmap, np.random.default_rng(0), rank=r, ridge=1e-3)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        estimate = SPEC.memory_bytes(None, T, 7, {"rank": r, "ridge": 1e-3})
        assert peak <= estimate <= 2 * peak, (T, r, peak, estimate)
    # O(T rank): at large T, doubling T or the rank about doubles the estimate
    small = SPEC.memory_bytes(None, 200_000, 7, {"rank": 1000})
    assert 1.9 < SPEC.memory_bytes(None, 400_000, 7, {"rank": 1000}) / small < 2.0
    assert 1.9 < SPEC.memory_bytes(None, 200_000, 7, {"rank": 2000}) / small < 2.1


def test_estimators_fit_it_and_kernel_ridge_agree_at_full_rank():
    d = make_data(D=8, T=50)
    krr = KernelRidgeRegressor(feature_map="relu", ridge=1e-2).fit(d.X_train, d.y_train)
    nys = NystroemRidgeRegressor(rank=50, ridge=1e-2, feature_map="relu", random_state=0)
    nys.fit(d.X_train, d.y_train)
    np.testing.assert_allclose(nys.predict(d.X_test), krr.predict(d.X_test), rtol=1e-8)
    assert nys.fit_arguments_ == {"rank": 50, "ridge": 1e-2}
    assert nys.kernel_evals_ == 2 * 50 * 50


def test_validate_run_plot_report(tmp_path):
    """Through every command, beside Shrinking Gradient and exact kernel ridge: validate prints
    its estimated time and memory, the run selects rank and ridge on validation, the figures
    and the report are made."""
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 2})
    cfg["feature_map"] = {"kind": "relu"}
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "kernel_ridge": {"ridge": [1e-3, 1e-2]},
        "nystroem_ridge": {"rank": [5, 60], "ridge": [1e-3, 1e-2]},
    }
    path = write_config(tmp_path / "nys.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    assert (
        "nystroem_ridge (rank=60): T=30: ~" in val.output
        and "(rank > T: 30 landmarks)" in val.output
    )
    out = tmp_path / "results"
    res = invoke(["run", path, "--out", out, "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "runs.csv")
    nys = runs[runs["method"] == "nystroem_ridge"]
    assert len(nys) == 2 * 4 and np.isfinite(nys["test_loss"]).all() and not nys["diverged"].any()
    assert set(nys["rank"]) == {5, 60}
    # rank 60 > T = 30: every row a landmark, the same fit as kernel ridge with the same ridge
    full = nys[nys["rank"] == 60].sort_values(["repetition", "ridge"])["test_loss"].to_numpy()
    krr = runs[runs["method"] == "kernel_ridge"].sort_values(["repetition", "ridge"])
    np.testing.assert_allclose(full, krr["test_loss"].to_numpy(), rtol=1e-7)
    assert invoke(["plot", out, "--format", "png"]).exit_code == 0
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    assert SPEC.label in (out / "REPORT.md").read_text()
