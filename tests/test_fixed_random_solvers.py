"""Fixed-Random's ``solver: ridge`` (one-pass recursive least squares on the same features) and
``average: true`` (the mean of the SGD iterates): the formulas against closed forms and explicit
loops, compiled against numpy bit for bit, the settings through ``ilnrun validate`` and ``run``,
and the cells of configs that do not use them unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, refused, tiny_config, write_config
from random_feature_cases import make_map

from ilnrun import config as C
from ilnrun.learners import fixed_random as fr
from ilnrun.learners import random_feature_kernels as kernels

EPS = np.finfo(float).eps
MAPS = ("coordinate", "relu", "fourier")


def _problem(seed: int, T: int, D: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, D)) / 2.0
    return X, np.tanh(X[:, 0] - X[:, 1]) + 0.1 * rng.standard_normal(T)


def _features(X, fmap, r: int, seed: int) -> np.ndarray:
    """``z(x_t)`` of the ``r`` parameters that ``fit`` draws from ``default_rng(seed)``."""
    W = fmap.sample(np.random.default_rng(seed), r)
    return np.array([fmap.point(x, W) for x in X]) / np.sqrt(r)


def _bound(A: np.ndarray) -> float:
    """A relative error a backward-stable solve of ``A`` reaches: ``n eps cond(A)``, with a
    factor 10 for the accumulation over the pass."""
    return 10 * len(A) * EPS * np.linalg.cond(A)


# (T, D, r, lam): primal (r <= T), square, dual (r > T), a small lam (ill-conditioned)
SHAPES = ((40, 5, 7, 0.01), (25, 6, 25, 0.003), (30, 6, 90, 1e-3), (60, 19, 300, 1e-5))


@pytest.mark.parametrize("kind", MAPS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"T{s[0]}-r{s[2]}")
def test_ridge_is_the_ridge_solution(kind, shape):
    """After T rounds beta solves (Z^T Z + T lam I) beta = Z^T y (numpy.linalg.solve), to the
    accuracy the system's conditioning allows; the features are those SGD draws."""
    T, D, r, lam = shape
    X, y = _problem(1, T, D)
    fmap = make_map(kind, D)
    res = fr.fit(X, y, fmap, np.random.default_rng(3), r=r, lam=lam, solver="ridge")
    Z = _features(X, fmap, r, 3)
    A = Z.T @ Z + T * lam * np.eye(r)
    beta = np.linalg.solve(A, Z.T @ y)
    got = res.predictor.coef * np.sqrt(r)
    assert np.linalg.norm(got - beta) <= _bound(A) * np.linalg.norm(beta)
    sgd = fr.fit(X, y, fmap, np.random.default_rng(3), r=r, eta=0.1)
    assert np.array_equal(res.predictor.W, sgd.predictor.W)  # the same draws
    assert res.counters["train_evals"] == r * T and res.counters["features_sampled"] == r
    assert not res.diverged and not res.timed_out


@pytest.mark.parametrize("shape", [(14, 5, 4, 0.05), (12, 6, 30, 0.002)], ids=["primal", "dual"])
def test_ridge_online_losses_are_prequential(shape):
    """Round t's loss is that of the ridge refitted on the points before t with the same
    penalty T lam (beta = 0 before the first point)."""
    T, D, r, lam = shape
    X, y = _problem(2, T, D)
    fmap = make_map("relu", D)
    res = fr.fit(X, y, fmap, np.random.default_rng(5), r=r, lam=lam, solver="ridge")
    Z = _features(X, fmap, r, 5)
    for t in range(T):
        A = Z[:t].T @ Z[:t] + T * lam * np.eye(r)
        beta = np.linalg.solve(A, Z[:t].T @ y[:t])
        yhat = Z[t] @ beta
        err = _bound(A) * np.linalg.norm(Z[t]) * np.linalg.norm(beta) + EPS
        resid = abs(yhat - y[t])
        assert abs(res.losses[t] - 0.5 * resid**2) <= (resid + err) * err, t


def _sgd_iterates(Z, y, etas, lam):
    """The SGD iterates beta_1 = 0, ..., beta_T that predicted x_1 .. x_T, written out."""
    beta, out = np.zeros(Z.shape[1]), []
    for t in range(len(y)):
        out.append(beta.copy())
        beta = beta - etas[t] * ((Z[t] @ beta - y[t]) * Z[t] + lam * beta)
    return np.array(out), beta


@pytest.mark.parametrize("kind", MAPS)
def test_average_is_the_mean_of_the_iterates(kind):
    """``average: true`` returns (1/T) sum_t beta_t over the iterates that predicted (the first
    one 0, the final one not included: Shrinking Gradient's fbar); the pass, its losses and
    counters are those of ``average: false``."""
    from ilnrun.schedules import step_sizes

    T, D, r, eta, lam = 50, 6, 20, 0.4, 0.05
    X, y = _problem(3, T, D)
    fmap = make_map(kind, D)
    kw = dict(r=r, eta=eta, lam=lam, schedule="inv_sqrt")
    avg = fr.fit(X, y, fmap, np.random.default_rng(4), average=True, **kw)
    last = fr.fit(X, y, fmap, np.random.default_rng(4), **kw)
    iterates, final = _sgd_iterates(
        _features(X, fmap, r, 4), y, step_sizes("inv_sqrt", eta, T), lam
    )
    scale = np.abs(iterates).max()
    assert np.allclose(
        avg.predictor.coef * np.sqrt(r), iterates.mean(axis=0), rtol=0, atol=1e-12 * scale
    )
    assert np.allclose(last.predictor.coef * np.sqrt(r), final, rtol=0, atol=1e-12 * scale)
    assert np.array_equal(avg.losses, last.losses) and avg.counters == last.counters


@pytest.mark.skipif(not kernels.sgk.available(), reason="numba is not available")
def test_average_of_a_diverged_pass_counts_the_round_that_diverged():
    """A pass stopped by a divergent prediction averages the iterates of the rounds played,
    the one that diverged included (as Shrinking Gradient's fbar over its losses)."""
    X, y = _problem(4, 80, 6)
    fmap = make_map("relu", 6)
    for fit in (fr.fit_numpy, fr.fit_compiled):
        res = fit(X, y, fmap, np.random.default_rng(0), r=16, eta=60.0, average=True)
        n = len(res.losses)
        assert res.diverged and n < 80
        iterates, _ = _sgd_iterates(_features(X[:n], fmap, 16, 0), y[:n], [60.0] * n, 0.0)
        want = iterates.mean(axis=0) / 4.0  # coef = beta / sqrt(r)
        assert np.allclose(res.predictor.coef, want, rtol=1e-9, atol=0)


CASES = [
    *[(k, dict(r=r, lam=lam, solver="ridge")) for k in MAPS for r, lam in ((9, 0.02), (70, 1e-4))],
    *[(k, dict(r=12, eta=0.3, lam=0.1, schedule="inv", average=True)) for k in MAPS],
    ("random_net", dict(r=9, lam=0.02, solver="ridge")),
    ("relu", dict(r=9, lam=0.02, solver="ridge", deadline=0.0)),
    ("relu", dict(r=70, lam=0.02, solver="ridge", deadline=0.0)),
    ("relu", dict(r=12, eta=0.3, average=True, deadline=0.0)),
]


@pytest.mark.skipif(not kernels.sgk.available(), reason="numba is not available")
@pytest.mark.parametrize(("kind", "kw"), CASES)
def test_compiled_equals_numpy_bit_for_bit(kind, kw):
    """The compiled passes and the numpy code give the same losses, coefficients and counters
    (a deadline already past: both stop after round 1)."""
    from ilnrun.features import RandomNet

    X, y = _problem(5, 50, 7)
    fmap = RandomNet(7, 5) if kind == "random_net" else make_map(kind, 7)
    a = fr.fit_numpy(X, y, fmap, np.random.default_rng(6), **kw)
    b = fr.fit_compiled(X, y, fmap, np.random.default_rng(6), **kw)
    assert np.array_equal(a.losses, b.losses)
    assert np.array_equal(a.predictor.coef, b.predictor.coef)
    assert a.counters == b.counters and a.timed_out == b.timed_out == ("deadline" in kw)
    assert len(a.losses) == (1 if "deadline" in kw else 50)


@pytest.mark.skipif(not kernels.sgk.available(), reason="numba is not available")
def test_fit_runs_ridge_compiled_after_its_check(monkeypatch):
    """``fit`` picks the compiled ridge where its self-check passed, else the numpy code."""
    X, y = _problem(6, 20, 4)
    fmap = make_map("relu", 4)
    assert fr.ridge_compiled(fmap)
    ref = fr.fit_numpy(X, y, fmap, np.random.default_rng(0), r=5, lam=0.1, solver="ridge")
    monkeypatch.setitem(fr._RIDGE_AGREES, kernels.kind_of(fmap), False)
    called = []
    monkeypatch.setattr(fr, "fit_compiled", lambda *a, **kw: called.append(1))
    res = fr.fit(X, y, fmap, np.random.default_rng(0), r=5, lam=0.1, solver="ridge")
    assert not called and np.array_equal(res.losses, ref.losses)


def test_bad_solver_settings_raise():
    X, y = _problem(7, 10, 3)
    fmap = make_map("relu", 3)
    for kw in (dict(solver="ridge", lam=0.0), dict(solver="lsq", lam=1.0), dict(lam=0.1, eta=None)):
        with pytest.raises(ValueError):
            fr.fit_numpy(X, y, fmap, np.random.default_rng(0), r=3, **kw)


# ----------------------------------------------------------------------------------------------
# configs


def test_configs_without_the_new_keys_keep_their_cells():
    """``solver: sgd`` and ``average: false`` written out give the cells (ids and settings) of
    a config that does not name them."""
    before = C.cells(C.resolve(tiny_config()))
    cfg = tiny_config()
    cfg["methods"]["fixed_random"].update(solver="sgd", average=False)
    after = C.cells(C.resolve(cfg))
    assert [(c.id, c.hyper) for c in before] == [(c.id, c.hyper) for c in after]


def _solver_config() -> dict:
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 1})
    cfg["methods"] = {
        "fixed_random": {
            "eta": [0.3, 1.0],
            "schedule": "inv_sqrt",
            "lam": [0.01, 0.1],
            "solver": ["sgd", "ridge"],
            "average": [False, True],
        }
    }
    return cfg


def test_grid_of_solvers_and_averages():
    """SGD settings cross eta, lam and average; ridge ones only lam (the step and average are
    not used there)."""
    hypers = [c.hyper for c in C.cells(C.resolve(_solver_config()))]
    ridge = [h for h in hypers if h["solver"] == "ridge"]
    sgd = [h for h in hypers if h["solver"] is None]
    assert len(sgd) == 8 and len(ridge) == 2
    assert all(h["eta"] is None and h["average"] is None for h in ridge)
    assert sorted(h["average"] is True for h in sgd) == [False] * 4 + [True] * 4


def test_one_lam_grid_serves_both_solvers():
    """A grid's ``lam = 0`` runs under SGD only (ridge leaves it out), and the SGD cells are
    those of the config without ``solver``."""
    cfg = tiny_config()
    cfg["methods"]["fixed_random"]["lam"] = [0.0, 0.1]
    before = [(c.id, c.hyper) for c in C.cells(C.resolve(cfg))]
    cfg["methods"]["fixed_random"]["solver"] = ["sgd", "ridge"]
    cells = C.cells(C.resolve(cfg))
    ridge = [c.hyper for c in cells if c.hyper.get("solver") == "ridge"]
    assert ridge and all(h["lam"] == 0.1 for h in ridge)
    assert [(c.id, c.hyper) for c in cells if c.hyper.get("solver") is None] == before


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"solver": "ridge"}, "methods.fixed_random.lam"),  # lam defaults to 0
        ({"solver": ["sgd", "ridge"], "lam": 0.0}, "methods.fixed_random.lam"),
        ({"solver": "lsq"}, "methods.fixed_random.solver"),
        ({"average": "yes"}, "methods.fixed_random.average"),
        ({"engine": "jax", "solver": "ridge", "lam": 0.1}, "methods.fixed_random.solver"),
        ({"engine": "jax", "average": True}, "methods.fixed_random.average"),
    ],
)
def test_validate_refuses_bad_settings(tmp_path, change, key):
    cfg = tiny_config()
    if "engine" in change:
        cfg["engine"] = change.pop("engine")
        cfg["feature_map"] = {"kind": "relu"}
    cfg["methods"]["fixed_random"].update(change)
    path = write_config(tmp_path / "bad.yaml", cfg)
    refused(invoke(["validate", path]), key)


def test_run_end_to_end(tmp_path):
    """``solver: [sgd, ridge]`` x ``average: [false, true]``: validate shows the settings, the
    run's rows name them, count r T evaluations, and select among all of them."""
    path = write_config(tmp_path / "c.yaml", _solver_config())
    res = invoke(["validate", path])
    assert res.exit_code == 0, res.output
    assert "solver:" in res.output and "average:" in res.output
    out = tmp_path / "out"
    res = invoke(["run", path, "--out", out, "-q"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 10
    ridge = runs[runs.solver == "ridge"]
    assert len(ridge) == 2 and ridge.eta.isna().all()
    assert set(ridge.setting) == {"lam=0.01,solver=ridge", "lam=0.1,solver=ridge"}
    sgd = runs[runs.solver == "sgd"]
    assert sorted(sgd.average.astype(bool)) == [False] * 4 + [True] * 4
    assert sgd.setting.str.contains("average=True").sum() == 4
    assert (runs.train_evals == runs.r * 30).all()
    assert np.isfinite(runs.test_nmse).all() and runs.selected.sum() == 1
