"""The rate claim where the two bounds can be told apart: label noise on ``clipped_gaussian``
(clean test labels, so a test loss is an excess risk exactly), the slope of T against B at a
fixed target, the decades a slope spans, and the report's exponent words and tables."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from conftest import run_and_report, tiny_config

from ilnrun.config import grid, schema
from ilnrun.datasets import DATASETS, build_dataset
from ilnrun.params import ConfigError
from ilnrun.rate import b_slope_over_repetitions, first_reach, slope_over_repetitions
from ilnrun.report.sections import rate as section

SPEC = {
    "kind": "clipped_gaussian",
    "D": 5,
    "T": 3000,
    "n_val": 1000,
    "n_test": 200,
    "sparsity": 4,
    "rkhs_norm": 2.0,
    "target_seed": 1,
}

# ---------------------------------------------------------------------------------------------
# the noise key


def _pair(sigma: float, seed: int = 0):
    clean = build_dataset(SPEC, np.random.default_rng(seed))
    noisy = build_dataset({**SPEC, "noise": sigma}, np.random.default_rng(seed))
    return clean, noisy


def test_noise_zero_is_the_noise_free_instance_and_the_old_cell_keys():
    clean, zero = _pair(0.0)
    for split in ("train", "val", "test"):
        for a, b in zip(clean.split(split), zero.split(split), strict=True):
            np.testing.assert_array_equal(a, b)
    # key_omit: a config that says noise: 0.0 has the cells (ids and keys) of one that does not
    base = schema.resolve(tiny_config())
    said = schema.resolve(tiny_config(**{"dataset.noise": 0.0}))
    assert [c.key for c in grid.cells(base)] == [c.key for c in grid.cells(said)]
    noisy = schema.resolve(tiny_config(**{"dataset.noise": 0.1}))
    assert [c.key for c in grid.cells(base)] != [c.key for c in grid.cells(noisy)]


def test_noise_reaches_training_and_validation_labels_only():
    sigma = 0.1
    clean, noisy = _pair(sigma)
    np.testing.assert_array_equal(clean.X_train, noisy.X_train)
    np.testing.assert_array_equal(clean.X_test, noisy.X_test)
    np.testing.assert_array_equal(clean.y_test, noisy.y_test)  # clean test labels
    xi = np.concatenate([noisy.y_train - clean.y_train, noisy.y_val - clean.y_val])
    n = len(xi)
    # the sample std of n N(0, sigma^2) draws has standard deviation ~ sigma / sqrt(2 n)
    assert abs(xi.std() - sigma) < 4 * sigma / math.sqrt(2 * n)
    assert abs(xi.mean()) < 4 * sigma / math.sqrt(n)
    assert noisy.info["noise"] == sigma


def test_the_test_loss_is_the_excess_risk_exactly():
    """The target f* (the clean labels) has test loss 0, so a predictor's test loss is its
    excess risk ½ mean (f − f*)² with nothing to subtract; on noisy labels the same predictor's
    loss is that plus the Bayes risk σ²/2, up to the noise's sampling error."""
    sigma = 0.1
    clean, noisy = _pair(sigma, seed=3)
    rng = np.random.default_rng(9)
    delta = 0.05 * rng.standard_normal(len(noisy.y_test))
    f_test = noisy.y_test + delta  # a predictor off the target by delta
    assert 0.5 * np.mean((noisy.y_test - clean.y_test) ** 2) == 0.0  # Bayes: test loss 0
    excess = 0.5 * np.mean(delta**2)
    assert 0.5 * np.mean((f_test - noisy.y_test) ** 2) == pytest.approx(excess, rel=1e-12)
    # on the noisy training labels: E ½ (f − y)² = excess + σ²/2 (+ cross term, mean 0)
    d_train = 0.05 * rng.standard_normal(len(noisy.y_train))
    f_train = clean.y_train + d_train
    risk = 0.5 * np.mean((f_train - noisy.y_train) ** 2)
    xi = noisy.y_train - clean.y_train
    # the estimator's standard deviation: of ½ (d − xi)² over n draws
    sd = np.std(0.5 * (d_train - xi) ** 2) / math.sqrt(len(xi))
    assert abs(risk - (0.5 * np.mean(d_train**2) + sigma**2 / 2)) < 4 * sd


def test_negative_noise_is_refused_with_its_key():
    with pytest.raises(ConfigError) as exc:
        schema.resolve(tiny_config(**{"dataset.noise": -0.1}))
    assert "noise" in str(exc.value)


def test_the_comparator_needs_clean_test_labels(monkeypatch):
    cfg = {
        "dataset": {**SPEC, "noise": 0.1},
        "methods": {"shrinking_gradient": {"B": 2.0}, "doubly_sgd": {"B": [1.0, 2.0]}},
    }
    assert section.comparator_ok(cfg) is None
    dirty = dataclasses.replace(DATASETS["clipped_gaussian"], clean_test=False)
    monkeypatch.setitem(DATASETS, "clipped_gaussian", dirty)
    assert section.comparator_ok(cfg) is not None
    cfg["dataset"]["noise"] = 0.0
    assert section.comparator_ok(cfg) is None


# ---------------------------------------------------------------------------------------------
# the statistics on curves whose slopes are known

Ts = [2.0**j for j in range(4, 14)]


def _curve(C: float, B: float, q: float, b: float) -> list[float]:
    """``epsilon(T) = C B^q T^-b``, so ``T(epsilon) = (C B^q / epsilon)^(1/b)``: exponent
    ``1/b`` in ``1/epsilon`` and ``q/b`` in ``B``."""
    return [C * B**q * T**-b for T in Ts]


@pytest.mark.parametrize("q, b", [(1.0, 0.5), (2.0, 1.0), (1.0, 1.0)])
def test_the_slope_in_B_is_q_over_b(q, b):
    target = 5e-3  # inside the grid for every B
    curves = {B: {r: (Ts, _curve(0.1 + 0.01 * r, B, q, b)) for r in range(3)} for B in (1, 2, 4)}
    st = b_slope_over_repetitions(curves, target)
    assert st["n"] == 3 and st["dropped"] == 0
    assert st["mean"] == pytest.approx(q / b, rel=1e-9) and st["std"] == pytest.approx(0, abs=1e-9)
    assert (st["x_lo"], st["x_hi"]) == (1, 4)
    assert st["decades"] == pytest.approx(math.log10(4))


def test_the_slope_in_B_with_noise_has_an_interval_that_holds_it():
    rng = np.random.default_rng(1)
    q, b = 1.0, 0.5
    curves = {
        B: {
            r: (Ts, [e * math.exp(0.1 * rng.standard_normal()) for e in _curve(0.1, B, q, b)])
            for r in range(20)
        }
        for B in (1, 2, 4)
    }
    st = b_slope_over_repetitions(curves, 5e-3)
    assert st["n"] == 20
    assert abs(st["mean"] - q / b) < st["ci95"] + 0.05
    assert 0 < st["ci95"] < 0.5


def test_a_B_that_does_not_reach_the_target_is_left_out():
    curves = {
        1.0: {0: (Ts, _curve(0.1, 1.0, 1.0, 0.5))},
        2.0: {0: (Ts, _curve(0.1, 2.0, 1.0, 0.5))},
        4.0: {0: (Ts, [1.0] * len(Ts))},  # never reaches it
    }
    st = b_slope_over_repetitions(curves, 5e-3)
    assert st["mean"] == pytest.approx(2.0) and st["x_hi"] == 2.0
    assert math.isnan(first_reach(*curves[4.0][0], 5e-3)[0])


def test_the_decades_are_those_of_the_targets_used():
    eps = _curve(1.0, 1.0, 0.0, 0.5)  # from 0.25 at T = 16 to 0.011 at T = 8192
    targets = [0.2, 0.1, 0.05, 0.02, 1e-4]  # 1e-4 is not reached inside the grid
    st = slope_over_repetitions({t: {0: (Ts, eps), 1: (Ts, eps)} for t in targets})
    assert st["mean"] == pytest.approx(2.0)
    assert 1 / st["x_hi"] == pytest.approx(0.02) and 1 / st["x_lo"] == pytest.approx(0.2)
    assert st["decades"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# the words


def _st(mean: float, ci: float, decades: float = 2.0) -> dict:
    return {"mean": mean, "ci95": ci, "n": 5, "dropped": 0, "std": 0.1, "decades": decades}


def _ex(sg: float, ds: float, sg_B: float, ds_B: float) -> dict:
    return {
        "eps": {
            "sg_avg": [(1.0, _st(sg, 0.1)), (2.0, _st(sg, 0.1))],
            "dsgd_dai": [(1.0, _st(ds, 0.1)), (2.0, _st(ds, 0.1))],
        },
        "B": {"sg_avg": [(1e-3, _st(sg_B, 0.2))], "dsgd_dai": [(1e-3, _st(ds_B, 0.2))]},
        "const": [(1.0, 0.03), (2.0, 0.12)],
        "noise": [0.1],
        "targets": [0.02, 1e-3],
    }


def test_exponents_below_both_bounds_say_neither_is_tight():
    text = section.exponent_words(_ex(1.2, 0.8, 0.8, 0.9))
    assert "Neither bound is tight on these data" in text
    assert "every target ε below the mean predictor's excess risk" in text
    assert (
        "SG avg (bound: exponent 2 in 1/ε and in B): T grows as (1/ε)^p with p = "
        "1.20 [1.10, 1.30] at B = 1" in text
    )
    assert "every interval below 2" in text and "every interval below 4" in text
    assert "overlapping" not in text
    assert (
        "Doubly SGD's exponent in 1/ε lies below Shrinking Gradient's averaged predictor's at "
        "B = 1, 2 (of 2 B;" in text
    )
    assert "grows more slowly than Shrinking Gradient's" in text


def test_exponents_that_reach_four_are_said_to_allow_it():
    text = section.exponent_words(_ex(2.0, 4.0, 2.0, 4.1))
    assert "Doubly SGD's intervals reach 4: the data allow the B⁴/ε⁴ dependence" in text
    assert "lies above Shrinking Gradient's averaged predictor's at B = 1, 2 (of 2 B;" in text
    assert "intervals reach 4" in text
    assert section._where(1.9, 2.1) == "holds 2, below 4"
    assert section._where(3.9, 4.1) == "above 2, holds 4"
    assert section._where(0.5, 1.5) == "below both 2 and 4"


# ---------------------------------------------------------------------------------------------
# end to end


def test_the_section_renders_its_exponents_for_a_noisy_B_sweep(tmp_path):
    cfg = {
        "name": "rate_noisy_tiny",
        "seed": 0,
        "repetitions": 2,
        "dataset": {
            "kind": "clipped_gaussian",
            "D": 3,
            "T": [16, 32, 64, 128],
            "n_val": 20,
            "n_test": 40,
            "sparsity": 3,
            "rkhs_norm": [1.0, 2.0],
            "target_seed": 1,
            "noise": 0.05,
        },
        "feature_map": {"kind": "coordinate"},
        "budget": {"match": "evaluations", "dsgd_k": 1},
        "evaluation": {"m_test": 10, "n_test_estimated": 10},
        "methods": {
            "shrinking_gradient": {"preset": "theory", "B": [1.0, 2.0], "c": 0.01},
            "doubly_sgd": {
                "preset": ["grid", "dai"],
                "eta": [0.1, 0.3],
                "epsilon": [0.1, 0.03, 0.01],
                "B": [1.0, 2.0],
                "theta_nu": [1, 2],
                "cap": [0.3],
            },
        },
    }
    text = run_and_report(tmp_path, cfg)
    assert "### Exponents against O(B²/ε²) and O(B⁴/ε⁴)" in text
    assert "| learner | ε | exponent [95% CI] | B used | repetitions |" in text
    head = text.split("## Headline")[1].split("\n## ")[0]
    assert "what the data show about O(B²/ε²)" in head
    assert "label noise σ = 0.05" in head
    assert "theta nu = 1, 2, positive integers as Theorems 5–6" in text
    assert "the test labels are clean" in text
    assert "With `noise` = σ > 0, Gaussian noise" in text  # the dataset's choice sentence
    # the comparator check takes each task's own ball (B = rkhs_norm): loss 0 to rounding
    rows = [line for line in text.splitlines() if line.startswith("| D = 3, T = 16, rkhs_norm")]
    assert len(rows) == 2, rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == "yes" and cells[3] == "0 to rounding (< 1e-12)", row
