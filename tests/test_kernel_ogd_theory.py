"""Kernel OGD's like-for-like settings with Shrinking Gradient (theorem1's control): the theory
preset's step ``eta = B / sqrt(T)`` and SG's shrink rule on the exact prediction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ilnrun.config import resolve
from ilnrun.config.grid import method_grid
from ilnrun.datasets import clipped_gaussian
from ilnrun.features import Coordinate, Fourier
from ilnrun.learners import kernel_ogd
from ilnrun.learners.shrinking_gradient import theory_preset
from ilnrun.params import key_part

SPEC = kernel_ogd.SPEC


def _data(T: int = 80, D: int = 6, seed: int = 6):
    return clipped_gaussian(np.random.default_rng(seed), D=D, T=T, n_val=1, n_test=1, sparsity=3)


@pytest.mark.parametrize("T", [100, 1000, 12345])
@pytest.mark.parametrize("B", [1.0, 0.3])
def test_theory_preset_eta_is_B_over_sqrt_T(T, B):
    args = SPEC.fit_arguments({"preset": "theory", "B": B, "shrink": False}, None, T)
    assert args["eta"] == B / math.sqrt(T)
    assert args["eta"] == theory_preset(B, T, 1.0)[0]  # Shrinking Gradient's eta, the same
    assert args["schedule"] == "constant" and "preset" not in args


def test_preset_hides_the_step_grid_and_B_is_used_only_where_needed():
    assert {"eta", "schedule", "decay", "shrink"} <= SPEC.unused({"preset": "theory"})
    assert "B" not in SPEC.unused({"preset": "theory", "shrink": False})
    plain = {"preset": "grid", "shrink": False, "schedule": "constant"}
    assert {"preset", "B", "shrink"} <= SPEC.unused(plain)  # the plain pass: as before
    assert "B" not in SPEC.unused({"preset": "grid", "shrink": True, "schedule": "constant"})


def _hand_loop(X, y, fmap, etas, B, shrink):
    """Shrinking Gradient's Algorithm 1 with the exact prediction, written out."""
    K = fmap.kernel(X, X)
    alpha, losses, shrinks = np.zeros(len(y)), np.zeros(len(y)), 0
    for t in range(len(y)):
        yhat = K[t, :t] @ alpha[:t]
        losses[t] = 0.5 * (yhat - y[t]) ** 2
        if shrink and abs(yhat) >= 16 * B:
            alpha[:t] = alpha[:t] / 4
            shrinks += 1
        else:
            alpha[t] = etas[t] * (y[t] - yhat)
    return alpha, losses, shrinks


@pytest.mark.parametrize("fmap", [Coordinate(6), Fourier(6, sigma=1.0)], ids=lambda f: f.name)
def test_shrink_rule_equals_a_hand_written_loop_exactly(monkeypatch, fmap):
    """A small B makes the rule fire; with one block of kernel rows the pass computes the same
    dot products as the loop, so every number is equal, not just close."""
    monkeypatch.setattr(kernel_ogd, "BLOCK", 512)  # one block: the same kernel matrix
    d = _data()
    X, y, B, eta = d.X_train, 3 * d.y_train, 0.02, 0.9
    alpha, losses, shrinks = _hand_loop(X, y, fmap, [eta] * len(y), B, True)
    assert shrinks > 5  # the rule is exercised
    res = kernel_ogd.fit(X, y, fmap, None, eta=eta, B=B, shrink=True)
    np.testing.assert_array_equal(res.predictor.alpha, alpha)
    np.testing.assert_array_equal(res.losses, losses)
    assert res.counters["shrinks"] == shrinks
    assert res.counters["kernel_evals"] == len(y) * (len(y) - 1) // 2
    # without the rule, the same data: no shrink, the plain pass
    plain = kernel_ogd.fit(X, y, fmap, None, eta=eta, B=B)
    ref, _, _ = _hand_loop(X, y, fmap, [eta] * len(y), B, False)
    np.testing.assert_array_equal(plain.predictor.alpha, ref)
    assert plain.counters["shrinks"] == 0


def test_shrink_in_the_primal_equals_kernel_rows(monkeypatch):
    """Past the primal threshold the same rule divides the primal vector by 4: the same pass."""
    import ilnrun.learners.kernel_ogd as mod

    d = _data(T=120, D=5, seed=3)
    X, y, fmap = d.X_train, 3 * d.y_train, Coordinate(5)
    rows = mod.fit(X, y, fmap, None, eta=0.9, B=0.02, shrink=True)
    monkeypatch.setattr(mod, "primal_evaluation", lambda fmap, T: True)
    primal = mod.fit(X, y, fmap, None, eta=0.9, B=0.02, shrink=True)
    assert rows.counters == primal.counters and rows.counters["shrinks"] > 0
    np.testing.assert_allclose(primal.predictor.alpha, rows.predictor.alpha, rtol=1e-9, atol=1e-13)


def test_shrink_never_fires_below_16B():
    """Labels well inside 16 B: the rule never fires and the pass is the plain one, bit for
    bit."""
    d = _data()
    fmap = Coordinate(6)
    a = kernel_ogd.fit(d.X_train, d.y_train, fmap, None, eta=0.3, shrink=True)
    b = kernel_ogd.fit(d.X_train, d.y_train, fmap, None, eta=0.3)
    assert a.counters == b.counters and a.counters["shrinks"] == 0
    np.testing.assert_array_equal(a.predictor.alpha, b.predictor.alpha)


def _grid(methods: dict) -> list[dict]:
    """The grid points of ``methods.kernel_ogd`` (unused keys ``None``)."""
    params = resolve(
        {
            "name": "t",
            "dataset": {"kind": "clipped_gaussian", "D": 5, "T": 100, "n_val": 5},
            "feature_map": {"kind": "coordinate"},
            "methods": {"kernel_ogd": methods},
        }
    )["methods"]["kernel_ogd"]
    return method_grid("kernel_ogd", params)


def _hypers(methods: dict) -> list[dict]:
    """The cell keys' ``hyper`` part of each grid point of ``methods.kernel_ogd``."""
    return [key_part(SPEC.params, h) for h in _grid(methods)]


def _labels(methods: dict) -> list[str]:
    """runs.csv's ``setting`` of each grid point (ilnrun.cell: its used keys)."""
    return [",".join(f"{k}={v}" for k, v in h.items() if v is not None) for h in _grid(methods)]


def test_existing_settings_keep_their_cell_keys():
    """The new keys at their defaults leave every existing cell's key (and seed) as it was:
    only the step parameters it always had."""
    assert _hypers({"eta": [0.3, 1.0]}) == [{"eta": 0.3}, {"eta": 1.0}]
    assert _hypers({"eta": 0.7, "schedule": "inv"}) == [{"eta": 0.7, "schedule": "inv"}]
    # and their runs.csv label (``setting``) reads as before
    assert _labels({"eta": [0.3, 1.0]}) == [
        "eta=0.3,schedule=constant",
        "eta=1.0,schedule=constant",
    ]
    assert _labels({"preset": "theory", "shrink": [False, True]}) == [
        "preset=theory,B=1.0",
        "preset=theory,B=1.0,shrink=True",
    ]


def test_theory_cells_name_their_preset_and_collapse_the_step_grid():
    assert _hypers({"preset": "theory", "eta": [0.3, 1.0]}) == [{"preset": "theory"}]
    assert _hypers({"preset": "theory", "shrink": True, "B": 2.0}) == [
        {"preset": "theory", "B": 2.0, "shrink": True}
    ]
    assert _hypers({"eta": 0.3, "shrink": True}) == [{"eta": 0.3, "shrink": True}]
