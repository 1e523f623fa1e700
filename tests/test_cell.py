"""One cell (ilnrun.cell): its named plan and an open set of predictor kinds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import make_data, tiny_config

from ilnrun import cell as cellmod
from ilnrun import config as C
from ilnrun.features import FEATURE_MAPS
from ilnrun.learners.base import FitResult, new_counters


class MeanPredictor:
    """A learner's own kind of predictor: a constant, with ``predict`` only."""

    def __init__(self, c: float) -> None:
        self.c = c

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), self.c)


def test_a_predictor_with_only_predict_is_evaluated_exactly():
    d = make_data(T=30)
    inst = cellmod.Instance(d, FEATURE_MAPS["coordinate"](d.X_train.shape[1]))
    ev = C.resolve(tiny_config()).evaluation
    res = FitResult(MeanPredictor(0.0), np.zeros(30), new_counters())
    out = cellmod.evaluate(res, inst, ev, np.random.default_rng(0))
    ref = cellmod.reference_losses(d)
    assert out["eval_mode"] == "exact" and out["test_evals"] == 0
    assert out["test_loss"] == pytest.approx(ref["test_loss_zero"])
    assert out["val_loss"] == pytest.approx(0.5 * np.mean(d.y_val**2))


def test_the_plan_is_named_and_frozen():
    exp = C.resolve(tiny_config(methods={"doubly_sgd": {"eta": 0.3}}))
    cell = C.cells(exp)[0]
    inst = cellmod.instance(exp.seed, exp.feature_map, cell)
    p = cellmod.plan(exp.budget, cell, inst)
    assert p.cell is cell and p.spec.name == "doubly_sgd" and len(inst.data.y_train) == p.T
    assert p.budget is not None and p.budget.per_round == cell.per_round
    assert p.size() == p.args["k"] == p.budget.size("k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.T = 1  # type: ignore[misc]
