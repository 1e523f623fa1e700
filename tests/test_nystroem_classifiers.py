"""The batch classification references: Nyström features with scikit-learn's ``LinearSVC``
(``nystroem_svm``, hinge loss) and ``LogisticRegression`` (``nystroem_logistic``), their ``C``
and ``rank`` selected on validation, refused on real labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, refused, tiny_config, write_config
from test_losses import PM1

from ilnrun.datasets import DATASETS
from ilnrun.features import Fourier
from ilnrun.learners import LEARNERS
from ilnrun.losses import LOSSES, error_rate

NAMES = {"nystroem_svm": "hinge", "nystroem_logistic": "logistic"}


def _separable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Points on either side of a curved boundary, a margin of 0.3 left empty."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(4 * n, 2))
    score = X[:, 1] - np.sin(2 * X[:, 0])
    keep = np.abs(score) > 0.3
    X, score = X[keep][:n], score[keep][:n]
    return X, np.where(score > 0, 1.0, -1.0)


@pytest.mark.parametrize("name", NAMES)
def test_it_separates_a_separable_problem(name):
    X, y = _separable(300, 0)
    Xt, yt = _separable(500, 1)
    fmap = Fourier(2, sigma=0.7)
    spec = LEARNERS[name]
    res = spec.fit(X, y, fmap, np.random.default_rng(2), rank=100, C=100.0, loss=NAMES[name])
    assert error_rate(res.predictor.predict(X), y) <= 0.01
    assert error_rate(res.predictor.predict(Xt), yt) <= 0.05
    # a weaker penalty fits worse: C is what the grid selects
    loose = spec.fit(X, y, fmap, np.random.default_rng(2), rank=100, C=1e-3, loss=NAMES[name])
    assert error_rate(loose.predictor.predict(Xt), yt) > error_rate(res.predictor.predict(Xt), yt)
    assert res.counters["kernel_evals"] == 100 * 100 + 300 * 100
    assert res.counters["train_evals"] == 0
    np.testing.assert_allclose(
        res.losses, LOSSES[NAMES[name]].value(res.predictor.predict(X), y), rtol=1e-6, atol=1e-9
    )
    assert spec.supported_losses == (NAMES[name],)


@pytest.mark.parametrize("name", NAMES)
def test_labels_must_be_pm1_and_one_class_gives_zero(name):
    X, y = _separable(40, 3)
    fmap, spec = Fourier(2, sigma=1.0), LEARNERS[name]
    with pytest.raises(ValueError, match="-1, \\+1"):
        spec.fit(X, 0.5 * y, fmap, np.random.default_rng(0), rank=10)
    res = spec.fit(X, np.ones(40), fmap, np.random.default_rng(0), rank=10)
    assert not np.any(res.predictor.coef)


@pytest.mark.parametrize("name", NAMES)
def test_refused_on_real_labels_and_with_another_loss(tmp_path, name):
    """On the square loss (the default) it is refused naming ``loss``; with its own loss on a
    dataset of real labels, naming that the loss needs ±1 labels."""
    cfg = tiny_config(methods={name: {"rank": 10}})
    res = invoke(["validate", write_config(tmp_path / "a.yaml", cfg)])
    refused(res, "loss", name, NAMES[name])
    cfg = tiny_config(methods={name: {"rank": 10, "loss": NAMES[name]}})
    res = invoke(["validate", write_config(tmp_path / "b.yaml", cfg)])
    refused(res, f"methods.{name}.loss", "±1 labels")


def test_selected_on_validation_end_to_end(tmp_path, monkeypatch):
    """``ilnrun run`` on ±1 labels: both references with a grid of ``C``, beside Doubly SGD with
    the hinge loss on mini-batches; one setting of each selected, ``test_error`` reported."""
    monkeypatch.setitem(DATASETS, PM1.name, PM1)
    cfg = {
        "name": "clf",
        "seed": 3,
        "repetitions": 2,
        "loss": "hinge",
        "dataset": {"kind": "toy_pm1", "D": 4, "T": 60, "n_val": 40, "n_test": 50},
        "feature_map": {"kind": "fourier", "sigma": 1.0},
        "budget": {"dsgd_k": 2},
        "evaluation": {"m_test": 30, "curve_points": 5},
        "methods": {
            "doubly_sgd": {"eta": 0.5, "batch": 4},
            "nystroem_svm": {"rank": 30, "C": [0.01, 1.0, 100.0]},
            "nystroem_logistic": {"rank": 30, "C": [0.01, 1.0], "loss": "logistic"},
        },
    }
    path = write_config(tmp_path / "c.yaml", cfg)
    res = invoke(["run", path, "--out", tmp_path / "out", "--jobs", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    for name, n_settings in (("nystroem_svm", 3), ("nystroem_logistic", 2)):
        mine = runs[runs["method"] == name]
        assert mine["setting"].nunique() == n_settings
        assert mine["loss"].eq(NAMES[name]).all()
        sel = mine[mine["selected"]]
        assert len(sel) == 2 and sel["setting"].nunique() == 1  # one setting, both repetitions
        assert sel["test_error"].between(0, 0.5).all()
    res = invoke(["report", tmp_path / "out", "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
