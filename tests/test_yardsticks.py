"""The yardsticks of every cell (docs/protocol.md §8) and the divergence rule on test losses
(§4): the best constant predictor, NMSE, and 'a test loss above 100 × the zero predictor's
counts as diverged'."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ilnrun.cell import DIVERGED_FACTOR, blown_up, mark_diverged, reference_losses
from ilnrun.datasets import Dataset
from ilnrun.learners.base import FitResult, new_counters


def _data(y_train, y_test) -> Dataset:
    z = np.zeros((len(y_test), 1))
    return Dataset(
        np.zeros((len(y_train), 1)),
        np.asarray(y_train, float),
        z,
        np.asarray(y_test, float),
        z,
        np.asarray(y_test, float),
    )


def test_reference_losses_by_hand():
    d = _data([1.0, 3.0], [0.0, 2.0, 4.0, 6.0])  # training mean 2
    ref = reference_losses(d, 2)
    assert ref["test_loss_zero"] == pytest.approx(0.5 * (0 + 4 + 16 + 36) / 4)
    assert ref["test_loss_const"] == pytest.approx(0.5 * (4 + 0 + 4 + 16) / 4)
    assert ref["test_nmse_const"] == pytest.approx(((4 + 0 + 4 + 16) / 4) / np.var([0, 2, 4, 6]))
    assert ref["test_loss_const_subset"] == pytest.approx(0.5 * (4 + 0) / 2)  # first 2 points


def test_centred_training_labels_make_the_constant_the_zero_predictor():
    d = _data([-1.0, 1.0], [0.5, -0.25])
    ref = reference_losses(d)
    assert ref["test_loss_const"] == pytest.approx(ref["test_loss_zero"])


@pytest.mark.parametrize(
    ("test_loss", "zero", "expected"),
    [
        (100.0 * 0.25 + 1e-9, 0.25, True),
        (100.0 * 0.25, 0.25, False),  # the rule is strict
        (1220.0, 0.25, True),  # the case that went unflagged
        (5.0, 0.0, False),  # no zero-predictor scale: no rule
        (5.0, math.nan, False),
    ],
)
def test_blown_up_rule(test_loss, zero, expected):
    assert DIVERGED_FACTOR == 100.0
    assert blown_up(test_loss, zero) is expected


def test_a_blown_up_test_loss_marks_the_cell_diverged_with_its_reason():
    row = {
        "val_loss": 3.0,
        "test_loss": 1220.0,
        "test_nmse": 9e3,
        "online_loss": 0.5,
        "test_loss_zero": 0.25,
        "diverged": False,
    }
    res = FitResult(None, np.zeros(3), new_counters())
    mark_diverged(row, res, None)
    assert row["diverged"] is True
    assert row["test_loss"] == math.inf and row["val_loss"] == math.inf
    assert "> 100 × the zero predictor's" in row["diverged_reason"]


def test_a_modest_test_loss_is_left_alone():
    row = {
        "val_loss": 0.3,
        "test_loss": 0.3,
        "test_nmse": 2.0,
        "online_loss": 0.5,
        "test_loss_zero": 0.25,
        "diverged": False,
    }
    mark_diverged(row, FitResult(None, np.zeros(3), new_counters()), None)
    assert row["diverged"] is False and row["diverged_reason"] is None
