"""``average: true`` of the online learners (docs/algorithms.md §0.5): the returned predictor is
the averaged iterate ``fbar = (1/n) sum_{r<n} f_r`` (f_r the predictor of round r, f_0 = 0), the
pass unchanged; and Doubly SGD's ``theta_nu`` restricted to what Dai et al.'s theorems allow."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, refused, tiny_config, write_config

from ilnrun.features import Coordinate, Fourier, RandomNet, ReLU
from ilnrun.learners import doubly_sgd, kernel_ogd, shrinking_gradient
from ilnrun.learners import random_feature_kernels as rfk
from ilnrun.learners import shrinking_gradient_kernels as sgk


def _problem(T: int = 25, D: int = 6, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T + 40, D)) / 2.0
    y = np.tanh(X[:, 0] - X[:, 1])
    return X[:T], y[:T], X[T:]


# Doubly SGD: (eta, schedule, nu). The third is the dai preset uncapped at theta_nu = 1.5:
# gamma_1 nu = 1.5, a decay factor 1 - gamma_1 nu = -0.5 < 0 in round 1 (the pass then applies
# it to the coefficients directly); the fourth, theta_nu = 3: factors -2, -0.5, 0 in rounds 1-3.
DSGD_CASES = [
    (0.4, "constant", 0.0),
    (0.4, "inv_sqrt", 0.3),
    (3.0, "inv_t", 0.5),
    (3.0, "inv_t", 1.0),
]


@pytest.mark.parametrize("eta, schedule, nu", DSGD_CASES)
def test_dsgd_averaged_is_the_mean_of_the_iterates(eta, schedule, nu):
    """The averaged predictor's predictions equal the mean of the iterates' ``f_0 .. f_{T-1}``,
    each the final predictor of a pass over the first r examples (the same draws: round r draws
    the same features whatever follows it)."""
    X, y, X_test = _problem()
    fmap = Fourier(X.shape[1], 1.3)
    kw = dict(eta=eta, k=2, nu=nu, schedule=schedule)
    avg = doubly_sgd.fit_numpy(X, y, fmap, np.random.default_rng(5), average=True, **kw)
    final = doubly_sgd.fit_numpy(X, y, fmap, np.random.default_rng(5), **kw)
    assert not avg.diverged
    np.testing.assert_array_equal(avg.losses, final.losses)  # the pass is unchanged
    np.testing.assert_array_equal(avg.predictor.W, final.predictor.W)  # same support
    T = len(y)
    mean = np.zeros(len(X_test))
    for r in range(1, T):  # f_0 = 0
        f_r = doubly_sgd.fit_numpy(X[:r], y[:r], fmap, np.random.default_rng(5), **kw)
        mean += f_r.predictor.predict(X_test)
    mean /= T
    scale = np.max(np.abs(mean))
    np.testing.assert_allclose(avg.predictor.predict(X_test), mean, rtol=0, atol=1e-12 * scale)
    assert not np.allclose(mean, final.predictor.predict(X_test), rtol=1e-3)


@pytest.mark.parametrize("shrink", [False, True])
def test_kernel_ogd_averaged_is_the_mean_of_the_iterates(shrink):
    """Kernel OGD's averaged expansion, with SG's shrink rule firing (B small) or not."""
    X, y, X_test = _problem(T=30)
    fmap = Coordinate(X.shape[1])
    kw = dict(eta=1.5, schedule="constant", B=0.01, shrink=shrink)
    avg = kernel_ogd.fit(X, y, fmap, np.random.default_rng(0), average=True, **kw)
    final = kernel_ogd.fit(X, y, fmap, np.random.default_rng(0), **kw)
    assert (final.counters["shrinks"] >= 3) == shrink
    np.testing.assert_array_equal(avg.losses, final.losses)
    T = len(y)
    mean = np.zeros(len(X_test))
    for r in range(1, T):
        f_r = kernel_ogd.fit(X[:r], y[:r], fmap, np.random.default_rng(0), **kw).predictor
        mean += f_r.predict_exact(fmap.kernel(X_test, X[:r]))
    mean /= T
    got = avg.predictor.predict_exact(fmap.kernel(X_test, X))
    np.testing.assert_allclose(got, mean, rtol=0, atol=1e-12 * np.max(np.abs(mean)))


def test_shrinking_gradient_returns_its_averaged_expansion():
    """``average=True``: the returned predictor has the coefficients of ``averaged`` (which
    stays, for ``test_loss_avg``) and is another object (its predictions counted once); the
    pass and the final coefficients are those of ``average=False``."""
    X, y, _ = _problem(T=40)
    fmap = Coordinate(X.shape[1])
    kw = dict(eta=0.5, m=7, B=0.005, schedule="inv_sqrt")
    for fit in (shrinking_gradient.fit_numpy, shrinking_gradient.fit):
        a = fit(X, y, fmap, np.random.default_rng(2), average=True, **kw)
        f = fit(X, y, fmap, np.random.default_rng(2), **kw)
        assert f.counters["shrinks"] > 0
        np.testing.assert_array_equal(a.losses, f.losses)
        np.testing.assert_array_equal(a.averaged.alpha, f.averaged.alpha)
        np.testing.assert_array_equal(a.predictor.alpha, f.averaged.alpha)
        assert a.predictor is not a.averaged
        assert not np.array_equal(f.predictor.alpha, f.averaged.alpha)


def test_iterate_weights_hand_computed():
    """``G_i = sum_{i<r<n} prod_{i<q<r} d_q`` for n = 4, factors d_1 = -0.5, d_2 = 0 (d_0 is not
    used): G = [1 + d_1 + d_1 d_2, 1 + d_2, 1, 0] / 4; numpy and compiled recursion alike."""
    d = np.array([7.0, -0.5, 0.0])
    want = np.array([0.5, 1.0, 1.0, 0.0]) / 4
    np.testing.assert_array_equal(shrinking_gradient.iterate_weights(d), want)
    if sgk.available():
        np.testing.assert_array_equal(shrinking_gradient.iterate_weights(d, compiled=True), want)


MAPS = [Coordinate, ReLU, lambda D: Fourier(D, 1.7), lambda D: RandomNet(D, 5)]


@pytest.mark.parametrize("make_map", MAPS)
@pytest.mark.parametrize("eta, schedule, nu", DSGD_CASES[1:])
def test_dsgd_compiled_equals_numpy_with_average(make_map, eta, schedule, nu):
    X, y, _ = _problem(T=40, D=7)
    fmap = make_map(X.shape[1])
    if not rfk.use_compiled(fmap):
        pytest.skip("compiled passes not in use in this process")
    kw = dict(eta=eta, k=3, nu=nu, schedule=schedule, average=True)
    r0 = doubly_sgd.fit_numpy(X, y, fmap, np.random.default_rng(1), **kw)
    r1 = doubly_sgd.fit_compiled(X, y, fmap, np.random.default_rng(1), **kw)
    assert np.array_equal(r0.losses, r1.losses)
    assert np.array_equal(r0.predictor.coef, r1.predictor.coef)
    assert np.array_equal(r0.predictor.W, r1.predictor.W)


def test_sg_compiled_equals_numpy_with_average():
    X, y, _ = _problem(T=60, D=7)
    fmap = Coordinate(X.shape[1])
    if not sgk.use_compiled(fmap):
        pytest.skip("compiled passes not in use in this process")
    kw = dict(eta=0.5, m=9, B=0.005, schedule="inv_sqrt", average=True)
    r0 = shrinking_gradient.fit_numpy(X, y, fmap, np.random.default_rng(1), **kw)
    r1 = shrinking_gradient.fit_compiled(X, y, fmap, np.random.default_rng(1), **kw)
    assert r0.counters["shrinks"] > 0
    assert np.array_equal(r0.predictor.alpha, r1.predictor.alpha)


# ----------------------------------------------------------------------------------------------
# the command line


AVERAGED = ("shrinking_gradient", "doubly_sgd", "kernel_ogd")


def _tiny(average) -> dict:
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 1})
    del cfg["methods"]["fixed_random"]
    if average is not None:
        for name in AVERAGED:
            cfg["methods"][name]["average"] = average
    return cfg


def test_cli_average_grid_end_to_end(tmp_path):
    """``average: [false, true]`` for the three learners: the ``false`` rows are the rows of the
    config without the key (cell ids, settings and numbers); the ``true`` rows add one cell per
    setting, seeded like its ``false`` twin: the same pass (online loss, evaluations), another
    predictor; Shrinking Gradient's averaged rows test the expansion its ``test_loss_avg``
    column scores, with the same draws."""
    cols = ["cell_id", "setting", "online_loss", "train_evals", "val_loss", "test_nmse"]
    frames = {}
    for label, average in (("without", None), ("grid", [False, True])):
        path = write_config(tmp_path / f"{label}.yaml", _tiny(average))
        res = invoke(["run", path, "--out", tmp_path / label, "-q"])
        assert res.exit_code == 0, res.output
        frames[label] = pd.read_csv(tmp_path / label / "runs.csv")
    without, grid = frames["without"], frames["grid"]
    assert len(grid) == 2 * len(without)
    plain = grid[~grid["setting"].str.contains("average")]
    pd.testing.assert_frame_equal(
        plain[cols].reset_index(drop=True), without[cols].reset_index(drop=True)
    )
    averaged = grid[grid["setting"].str.contains("average=True")]
    assert set(averaged["method"]) == set(AVERAGED)
    assert averaged["average"].eq(True).all()
    pairs = averaged.assign(setting=averaged["setting"].str.replace(",average=True", ""))
    both = pairs.merge(plain, on=["method", "setting"], suffixes=("_A", ""))
    assert len(both) == len(averaged)
    assert not set(both["cell_id_A"]) & set(both["cell_id"])
    for col in ("train_evals", "online_loss", "features_sampled", "shrinks"):
        np.testing.assert_array_equal(both[f"{col}_A"], both[col])
    assert (both["test_nmse_A"] != both["test_nmse"]).all()
    # the same support, less the last round's terms (weight 0: f_{T+1} is not averaged), which
    # an expansion on stored inputs does not evaluate
    kernel = both["method"] != "doubly_sgd"
    np.testing.assert_array_equal(both["test_evals_A"][~kernel], both["test_evals"][~kernel])
    np.testing.assert_array_equal(both["test_evals_A"][kernel], both["test_evals"][kernel] - 1)
    assert both["test_nmse_A"].notna().all() and not both["diverged_A"].any()
    sg = both[both["method"] == "shrinking_gradient"]
    np.testing.assert_allclose(sg["test_loss_A"], sg["test_loss_avg"], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(sg["test_loss_avg_A"], sg["test_loss_avg"])


def test_validate_shows_average_and_refuses_bad_values(tmp_path):
    path = write_config(tmp_path / "ok.yaml", _tiny([False, True]))
    res = invoke(["validate", path])
    assert res.exit_code == 0, res.output
    assert "average: [false, true]" in res.output
    bad = write_config(tmp_path / "bad.yaml", _tiny("yes"))
    refused(invoke(["validate", bad]), "methods.doubly_sgd.average", "true or false")


def test_jax_engine_refuses_average(tmp_path):
    cfg = _tiny([False, True])
    cfg["engine"] = "jax"
    refused(
        invoke(["validate", write_config(tmp_path / "jax.yaml", cfg)]),
        "methods.doubly_sgd.average",
        "jax",
    )


@pytest.mark.parametrize(
    "value, path", [(2.5, "theta_nu"), ([1.5, 0.5], None), ([3.0, 1.0, 2.2], "theta_nu[2]")]
)
def test_theta_nu_outside_dai_theorems_refused(tmp_path, value, path):
    cfg = tiny_config(**{"methods.doubly_sgd.preset": "dai", "methods.doubly_sgd.theta_nu": value})
    res = invoke(["validate", write_config(tmp_path / "dai.yaml", cfg)])
    if path is None:  # 0.5 < 1: the declared range
        refused(res, "methods.doubly_sgd.theta_nu[1]")
        return
    refused(res, f"methods.doubly_sgd.{path}", "Theorem 4", "Theorems 5 and 6", "Z+")


@pytest.mark.parametrize("value", [1.0, 1.5, 1.999, 2, 3.0, [1.2, 4]])
def test_theta_nu_inside_dai_theorems_accepted(tmp_path, value):
    cfg = tiny_config(**{"methods.doubly_sgd.preset": "dai", "methods.doubly_sgd.theta_nu": value})
    res = invoke(["validate", write_config(tmp_path / "dai.yaml", cfg)])
    assert res.exit_code == 0, res.output


def test_estimator_average_is_the_learners_own():
    """The estimators' ``average`` is the learner's parameter: Doubly SGD's averaged pass."""
    from ilnrun.estimators import DoublySGDRegressor

    X, y, X_test = _problem(T=50)
    kw = dict(eta=0.3, feature_map="fourier", random_state=0, center_y=False, scale_y=False)
    a = DoublySGDRegressor(4, average=True, **kw).fit(X, y)
    f = DoublySGDRegressor(4, **kw).fit(X, y)
    direct = doubly_sgd.fit(
        X, y, a.feature_map_, np.random.default_rng(0), eta=0.3, k=4, average=True
    )
    np.testing.assert_array_equal(a.predictor_.coef, direct.predictor.coef)
    assert not np.array_equal(a.predict(X_test), f.predict(X_test))


def test_estimator_refuses_theta_nu_outside_the_theorems():
    from ilnrun.estimators import DoublySGDRegressor

    X, y, _ = _problem(T=20)
    est = DoublySGDRegressor(2, preset="dai", theta_nu=2.5, feature_map="fourier")
    with pytest.raises(ValueError, match="'theta_nu'.*Theorem 4"):
        est.fit(X, y)
