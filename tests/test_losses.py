"""The losses (ilnrun/losses/, docs/protocol.md §12): each registered loss's derivative against a
finite difference and its best constant against a numeric minimiser (a new loss is tested
without editing this file), the ``loss`` key's refusals (exit status 2, the key named), the
online learners learning with a classification loss end to end, and the square loss unchanged."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, refused, tiny_config, write_config

from ilnrun import config as C
from ilnrun.datasets import DATASETS, Dataset, DatasetSpec, declared
from ilnrun.datasets.base import param, splits, synthetic_sizes
from ilnrun.learners import LEARNERS
from ilnrun.learners.base import OnlinePass
from ilnrun.losses import LABEL_SPACES, LOSSES, METRICS, LossSpec, error_rate
from ilnrun.params import ConfigError

LABELS = {"real": np.linspace(-0.9, 0.8, 13), "pm1": np.array([1.0, -1, 1, 1, -1, 1, 1, -1])}


# ----------------------------------------------------------------------------------------------
# a toy ±1 dataset (a test's own DatasetSpec): the sign of a random projection, a few labels
# flipped

PM1_PARAMS = (
    *synthetic_sizes(5),
    param("flip", "float", 0.1, "fraction of labels flipped", min=0, key_omit=0.1),
)


@declared(PM1_PARAMS)
def toy_pm1(
    rng: np.random.Generator, *, D: int, T: int, n_val: int, n_test: int, flip: float
) -> Dataset:
    """``y = sign(a . x)``, ``x ~ N(0, I / D)``, each label flipped with probability ``flip``."""
    n = T + n_val + n_test
    X = rng.standard_normal((n, D)) / np.sqrt(D)
    y = np.where(X @ rng.standard_normal(D) >= 0, 1.0, -1.0)
    y[rng.random(n) < flip] *= -1.0
    return splits(np.ascontiguousarray(X), y, T, n_val, {})


PM1 = DatasetSpec(
    name="toy_pm1",
    build=toy_pm1,
    params=PM1_PARAMS,
    summary="the sign of a random projection, labels flipped (a test's ±1 dataset)",
    example=lambda folder: {"D": 3, "T": 40, "n_val": 20, "n_test": 30},
    labels="pm1",
)


@pytest.fixture
def pm1(monkeypatch):
    monkeypatch.setitem(DATASETS, PM1.name, PM1)


def _pm1_config(**methods) -> dict:
    return {
        "name": "clf",
        "seed": 3,
        "repetitions": 2,
        "dataset": {"kind": "toy_pm1", "D": 5, "T": 60, "n_val": 40, "n_test": 50},
        "feature_map": {"kind": "relu"},
        "budget": {"dsgd_k": 2},
        "evaluation": {"m_test": 30, "curve_points": 5},
        "methods": methods,
    }


# ----------------------------------------------------------------------------------------------
# the contract over every registered loss


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_loss_is_well_formed(name):
    spec = LOSSES[name]
    assert isinstance(spec, LossSpec) and spec.name == name and spec.label and spec.summary
    assert spec.labels in LABEL_SPACES and set(spec.metrics) <= set(METRICS)
    assert spec.value.__doc__ and spec.derivative.__doc__  # the formula, stated


@pytest.mark.parametrize("name", list(LOSSES))
def test_derivative_is_the_finite_difference_of_the_value(name):
    spec = LOSSES[name]
    y = LABELS[spec.labels]
    rng = np.random.default_rng(0)
    for p in rng.uniform(-2.5, 2.5, size=(20, len(y))):
        # away from a kink (the hinge's at y p = 1): a central difference is exact to O(h^2)
        p = np.where(np.abs(y * p - 1.0) < 1e-3, p + 0.01, p)
        h = 1e-6
        fd = (spec.value(p + h, y) - spec.value(p - h, y)) / (2 * h)
        np.testing.assert_allclose(spec.derivative(p, y), fd, rtol=1e-5, atol=1e-6)
        for i in range(len(y)):  # scalars too: the online passes call it with Python floats
            assert float(spec.derivative(float(p[i]), float(y[i]))) == pytest.approx(
                float(spec.derivative(p, y)[i]), rel=1e-12, abs=1e-15
            )
            assert float(spec.value(float(p[i]), float(y[i]))) == pytest.approx(
                float(spec.value(p, y)[i]), rel=1e-12, abs=1e-15
            )


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("which", [0, 1, 2])
def test_best_constant_minimises_the_mean_loss(name, which):
    from scipy.optimize import minimize_scalar

    spec = LOSSES[name]
    rng = np.random.default_rng(which)
    if spec.labels == "pm1":
        y = np.where(rng.random(40 + which) < (0.3, 0.5, 0.8)[which], 1.0, -1.0)
    else:
        y = rng.uniform(-1, 1, 40 + which)
    c = spec.best_constant(y)
    num = minimize_scalar(lambda v: spec.risk(np.full_like(y, v), y), bounds=(-8, 8),
                          method="bounded", options={"xatol": 1e-10})  # fmt: skip
    assert spec.risk(np.full_like(y, c), y) <= num.fun + 1e-9
    if name != "hinge":  # strictly convex near its minimum: the minimiser itself
        assert c == pytest.approx(num.x, abs=1e-4)


def test_named_best_constants():
    y = np.array([1.0, 1.0, 1.0, -1.0])
    assert LOSSES["square"].best_constant(y) == 0.5
    assert LOSSES["squared_hinge"].best_constant(y) == 0.5
    assert LOSSES["hinge"].best_constant(y) == 1.0 and LOSSES["hinge"].best_constant(-y) == -1.0
    assert LOSSES["logistic"].best_constant(y) == pytest.approx(math.log(3))
    assert math.isfinite(LOSSES["logistic"].best_constant(np.ones(5)))  # one class: finite
    assert error_rate(np.array([0.5, -0.1, 0.0]), np.array([1.0, 1.0, 1.0])) == pytest.approx(2 / 3)


def test_square_loss_keeps_its_arithmetic():
    """The square loss's mean and a pass's losses are computed as before losses existed."""
    rng = np.random.default_rng(1)
    p, y = rng.standard_normal(101), rng.uniform(-1, 1, 101)
    assert LOSSES["square"].risk(p, y) == float(0.5 * np.mean((p - y) ** 2))
    run = OnlinePass(y, 0.1, "constant", None, None)
    run.diverges(0, 0.37)
    assert run.losses[0] == 0.5 * (0.37 - y[0]) ** 2 and run.gradient(0, 0.37) == 0.37 - y[0]


def test_a_new_loss_needs_one_module(monkeypatch, pm1):
    """A correct loss added to the registry (one module's SPEC) passes the contract and is
    taken by every learner that learns with every loss."""
    ramp = LossSpec(
        name="toy_exp",
        label="exp(−yp)",
        summary="the exponential loss (a test's toy loss)",
        value=lambda p, y: np.exp(-y * p),
        derivative=lambda p, y: -y * np.exp(-y * p),
        labels="pm1",
        best_constant=lambda y: 0.5 * math.log(np.sum(y > 0) / np.sum(y < 0)),
        metrics=("test_error",),
    )
    monkeypatch.setitem(LOSSES, ramp.name, ramp)
    test_derivative_is_the_finite_difference_of_the_value("toy_exp")
    test_best_constant_minimises_the_mean_loss("toy_exp", 1)
    exp = C.resolve(_pm1_config(doubly_sgd={"eta": 0.3}) | {"loss": "toy_exp"})
    assert exp["methods"]["doubly_sgd"]["loss"] == "toy_exp" and exp.loss == "toy_exp"
    assert "toy_exp" in LEARNERS["doubly_sgd"].supported_losses


# ----------------------------------------------------------------------------------------------
# the loss key: resolution and refusals


def test_square_loss_changes_no_config_cell_or_digest():
    plain = C.resolve(tiny_config())
    named = C.resolve(tiny_config() | {"loss": "square"})
    per = tiny_config()
    per["methods"]["doubly_sgd"]["loss"] = "square"
    per = C.resolve(per)
    for exp in (named, per):
        assert exp.as_dict() == plain.as_dict() and "loss" not in exp.as_dict()
        assert [c.id for c in C.cells(exp)] == [c.id for c in C.cells(plain)]
        assert [C.record_digest(exp, c) for c in C.cells(exp)] == [
            C.record_digest(plain, c) for c in C.cells(plain)
        ]


def test_a_learner_s_loss_overrides_the_experiment_s(pm1):
    cfg = _pm1_config(doubly_sgd={"eta": 0.3}, shrinking_gradient={"eta": 0.3, "loss": "square"})
    exp = C.resolve(cfg | {"loss": "hinge"})
    assert exp["methods"]["doubly_sgd"]["loss"] == "hinge"
    assert "loss" not in exp["methods"]["shrinking_gradient"]
    cells = C.cells(exp)
    hinge = [c for c in cells if c.method == "doubly_sgd"]
    assert all(c.key["hyper"]["loss"] == "hinge" for c in hinge)  # a cell of its own


@pytest.mark.parametrize(
    "change, key, words",
    [
        ({"loss": "hinge"}, "loss", ["shrinking_gradient", "square", "methods.shrinking_gradient"]),
        (
            {"methods.shrinking_gradient.loss": "squared_hinge"},
            "methods.shrinking_gradient.loss",
            ["square", "logistic", "not analytic"],
        ),
        ({"loss": "hing"}, "loss", ["hinge", "logistic"]),  # unknown: the choices and a hint
        ({"loss": ["square", "hinge"]}, "loss", []),
    ],
)
def test_unsupported_losses_are_refused(tmp_path, change, key, words):
    cfg = tiny_config()
    for path, value in change.items():
        node, *rest = path.split(".")
        if rest:
            cfg["methods"][rest[0]][rest[1]] = value
        else:
            cfg[node] = value
    with pytest.raises(ConfigError):
        C.resolve(cfg)
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, f"{key}:", *words)


def test_a_pm1_loss_on_real_labels_is_refused(tmp_path):
    cfg = tiny_config()
    del cfg["methods"]["shrinking_gradient"]
    cfg["methods"]["doubly_sgd"]["loss"] = "logistic"
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, "methods.doubly_sgd.loss:", "±1 labels", "clipped_gaussian", "square")


def test_ridge_is_refused_a_classification_loss(pm1):
    with pytest.raises(ConfigError, match="methods.fixed_random.solver"):
        C.resolve(_pm1_config(fixed_random={"solver": "ridge", "lam": 0.1, "loss": "hinge"}))


def test_jax_refuses_a_loss_its_passes_lack(pm1):
    """The jax passes implement the square loss: another is refused at validation, named."""
    for name in ("doubly_sgd", "fixed_random", "kernel_ogd"):
        cfg = _pm1_config(**{name: {"eta": 0.3, "loss": "hinge"}}) | {"engine": "jax"}
        with pytest.raises(ConfigError, match=rf"methods\.{name}\.loss: loss = 'hinge'"):
            C.resolve(cfg)


def test_compiled_passes_leave_other_losses_to_numpy(pm1, capsys):
    """The compiled passes declare the square loss: a hinge setting runs the numpy pass (a
    note), the square loss the compiled one, the same numbers as numpy."""
    from ilnrun.features import build_feature_map
    from ilnrun.learners import doubly_sgd, fixed_random

    d = toy_pm1(np.random.default_rng(0), D=4, T=50, n_val=5, n_test=5, flip=0.1)
    fmap = build_feature_map({"kind": "relu"}, d.X_train)
    for mod, kw in ((doubly_sgd, {"k": 2}), (fixed_random, {"r": 20})):
        for loss in ("square", "hinge"):
            args = dict(eta=0.3, loss=loss, **kw)
            a = mod.fit(d.X_train, d.y_train, fmap, np.random.default_rng(2), **args)
            b = mod.fit_numpy(d.X_train, d.y_train, fmap, np.random.default_rng(2), **args)
            np.testing.assert_array_equal(a.losses, b.losses)
            np.testing.assert_array_equal(a.predictor.coef, b.predictor.coef)
        with pytest.raises(ValueError, match="square loss only"):
            mod.fit_compiled(d.X_train, d.y_train, fmap, np.random.default_rng(2), eta=0.3,
                             loss="hinge", **kw)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# the learners with every loss


@pytest.mark.parametrize("learner", ["doubly_sgd", "fixed_random", "kernel_ogd"])
@pytest.mark.parametrize("loss", [n for n in LOSSES if n != "square"])
def test_online_learners_step_along_the_loss_derivative(learner, loss):
    """Dai et al. Algorithm 1 with a general loss: round 1's step is ``-eta l'(0, y_1)`` times
    the features, the square loss's ``-eta (0 - y_1)`` scaled by ``l'(0, y_1) / (0 - y_1)`` on
    the same draws; the online losses are the loss's values."""
    from ilnrun.features import build_feature_map

    d = toy_pm1(np.random.default_rng(1), D=4, T=30, n_val=5, n_test=5, flip=0.1)
    fmap = build_feature_map({"kind": "coordinate"}, d.X_train)
    spec, X, y = LEARNERS[learner], d.X_train, d.y_train
    args = {"eta": 0.5, "loss": loss}
    args |= {"doubly_sgd": {"k": 3}, "fixed_random": {"r": 7}}.get(learner, {})

    def coef(res) -> np.ndarray:
        f = res.predictor
        return f.alpha if hasattr(f, "alpha") else f.coef

    one = spec.fit(X[:1], y[:1], fmap, np.random.default_rng(0), **args)
    sq = spec.fit(X[:1], y[:1], fmap, np.random.default_rng(0), **(args | {"loss": "square"}))
    L = LOSSES[loss]
    ratio = float(L.derivative(0.0, y[0])) / (0.0 - y[0])
    assert np.any(coef(sq) != 0)
    np.testing.assert_allclose(coef(one), ratio * coef(sq), rtol=1e-12)
    res = spec.fit(X, y, fmap, np.random.default_rng(0), **args)
    assert res.losses[0] == pytest.approx(float(L.value(0.0, y[0])))
    assert np.all(np.isfinite(res.losses)) and len(res.losses) == len(y)


# ----------------------------------------------------------------------------------------------
# end to end: Doubly SGD with the hinge loss on ±1 labels, Shrinking Gradient with the square
# loss on the same labels


def test_hinge_for_doubly_sgd_runs_and_reports_test_error(pm1, tmp_path: Path):
    cfg = _pm1_config(
        doubly_sgd={"eta": [0.3, 1.0], "loss": "hinge"},
        fixed_random={"eta": 0.3, "loss": "logistic"},
        shrinking_gradient={"eta": 0.3},
    )
    path = write_config(tmp_path / "clf.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    out = tmp_path / "clf"
    run = invoke(["run", path, "--out", out, "-q"])
    assert run.exit_code == 0, run.output
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["loss"]) == {"hinge", "logistic", "square"}
    assert dict(zip(runs["method"], runs["loss"], strict=False))["doubly_sgd"] == "hinge"
    for _, row in runs.iterrows():  # test_error on ±1 labels, whatever the loss
        assert 0.0 <= row["test_error"] <= 1.0 and 0.0 <= row["test_error_const"] <= 1.0
        assert np.isfinite(row["test_loss"]) and np.isfinite(row["test_loss_const"])
    dsgd = runs[runs["method"] == "doubly_sgd"]
    assert dsgd["test_nmse"].isna().all() and (dsgd["test_loss_zero"] == 1.0).all()  # hinge at 0
    assert "loss=hinge" in dsgd["setting"].iloc[0]
    y = runs[runs["method"] == "shrinking_gradient"]
    assert np.isfinite(y["test_nmse"]).all()  # the square loss keeps its NMSE
    summary = pd.read_csv(out / "summary.csv")
    assert {"test_error_mean", "test_error_ci95", "loss"} <= set(summary.columns)
    plot = invoke(["plot", out, "--format", "png"])
    assert plot.exit_code == 0, plot.output
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    text = (out / "REPORT.md").read_text()
    assert "test_error" in text or "error rate" in text
    assert "hinge" in text
