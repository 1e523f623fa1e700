"""The rate comparison with Doubly SGD: the ``inv_t`` schedule, Doubly SGD's ``dai`` preset, the
fixed target of ``clipped_gaussian`` (``target_seed``), the analysis (T reaching a target
excess risk, slopes of T against 1/epsilon) and the report section."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, run_and_report, tiny_config, write_config

from ilnrun.config import grid, schema
from ilnrun.datasets import build_dataset
from ilnrun.features import build_feature_map
from ilnrun.learners import LEARNERS, doubly_sgd
from ilnrun.params import ConfigError
from ilnrun.rate import first_reach, rate_slope, reach_table, slope_over_repetitions
from ilnrun.schedules import step_sizes
from ilnrun.theory import best_in_ball_loss_primal

DSGD = LEARNERS["doubly_sgd"]

# ---------------------------------------------------------------------------------------------
# the schedule and the preset


def test_inv_t_is_eta_over_t():
    """Dai et al. Theorem 4: gamma_t = theta / t for t = 1..T."""
    np.testing.assert_array_equal(step_sizes("inv_t", 3.0, 4), [3.0, 1.5, 1.0, 0.75])


def _dai(**h):
    base = {"preset": "dai", "epsilon": 0.01, "B": 2.0, "theta_nu": 1.5, "cap": None}
    base.update(h)
    return base


def test_dai_preset_literal_is_theta_over_t_with_nu_epsilon_over_B_squared():
    args = DSGD.fit_arguments(_dai(), 1, 50)
    nu = 0.01 / 2.0**2  # nu = epsilon / B^2
    assert args["nu"] == pytest.approx(nu)
    assert args["schedule"] == "inv_t"
    assert args["eta"] == pytest.approx(1.5 / nu)  # theta nu = theta_nu
    assert args["k"] == 1
    assert args["eta"] * args["nu"] == pytest.approx(1.5)  # in (1, 2): Theorem 4


def test_dai_preset_capped_is_theta_over_t_plus_theta_over_cap():
    args = DSGD.fit_arguments(_dai(cap=0.05), 2, 50)
    theta = 1.5 / (0.01 / 4.0)
    t = np.arange(1, 51, dtype=float)
    gammas = step_sizes(args["schedule"], args["eta"], 50, args["decay"])
    np.testing.assert_allclose(gammas, theta / (t + theta / 0.05), rtol=1e-12)
    assert gammas.max() < 0.05  # never above the cap
    assert args["k"] == 2


def test_dai_pass_is_the_pass_with_its_derived_keywords(data_small):
    X, y, fmap = data_small
    args = DSGD.fit_arguments(_dai(cap=0.03, epsilon=0.002, B=1.0), 1, len(y))
    a = doubly_sgd.fit(X, y, fmap, np.random.default_rng(5), **args)
    b = doubly_sgd.fit(
        X,
        y,
        fmap,
        np.random.default_rng(5),
        k=1,
        eta=0.03,
        schedule="inv",
        decay=0.03 / (1.5 / 0.002),
        nu=0.002,
    )
    np.testing.assert_array_equal(a.losses, b.losses)


def test_literal_dai_steps_start_at_theta():
    """The literal reading's first step is theta = theta_nu B^2 / epsilon (150 at epsilon =
    0.01, B = 1): far above the step a squared loss with k(x, x) ~ 1/2 tolerates."""
    args = DSGD.fit_arguments(_dai(B=1.0), 1, 10)
    assert step_sizes(args["schedule"], args["eta"], 10)[0] == pytest.approx(150.0)


@pytest.fixture
def data_small():
    d = build_dataset(
        {"kind": "clipped_gaussian", "D": 30, "T": 60, "n_val": 5, "n_test": 5, "sparsity": 3},
        np.random.default_rng(0),
    )
    return d.X_train, d.y_train, build_feature_map({"kind": "coordinate"}, d.X_train)


def test_grid_settings_keep_their_cell_keys():
    """A Doubly SGD setting without the preset has exactly the key it had before the preset
    existed: the preset's parameters are blanked (unused) or at their frozen key_omit."""
    cfg = schema.resolve(tiny_config())
    for cell in grid.cells(cfg):
        if cell.method == "doubly_sgd":
            assert set(cell.key["hyper"]) <= {"eta", "schedule", "decay", "nu"}, cell.key


def test_dai_settings_blank_the_step_keys_and_differ_by_epsilon():
    settings = grid.method_grid(
        "doubly_sgd",
        {"preset": ["grid", "dai"], "eta": [0.1, 0.3], "epsilon": [0.01, 0.001], "cap": [None]},
    )
    dai = [h for h in settings if h["preset"] == "dai"]
    assert len(dai) == 2  # eta is unused under the preset: no duplicates
    assert all(h["eta"] is None and h["epsilon"] in (0.01, 0.001) for h in dai)
    plain = [h for h in settings if h["preset"] is None]  # grid: preset itself blanked
    assert len(plain) == 2 and all(h["epsilon"] is None for h in plain)


def test_theta_nu_below_one_is_refused_with_its_key(tmp_path):
    cfg = tiny_config()
    cfg["methods"]["doubly_sgd"] = {"preset": "dai", "theta_nu": 0.5}
    with pytest.raises(ConfigError) as exc:
        schema.resolve(cfg)
    assert "methods.doubly_sgd.theta_nu" in str(exc.value)
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    assert res.exit_code == 2 and "theta_nu" in res.output and "Traceback" not in res.output


def test_jax_twin_takes_the_inv_t_steps():
    pytest.importorskip("jax")
    from ilnrun.learners import doubly_sgd_jax

    args = DSGD.fit_arguments(_dai(), 1, 5)
    etas = doubly_sgd_jax.inputs(args, 5)["etas"]
    np.testing.assert_allclose(etas, args["eta"] / np.arange(1, 6))


# ---------------------------------------------------------------------------------------------
# the fixed target


def _instance(T: int, seed: int, target_seed: int | None = 7, D: int = 6):
    spec = {
        "kind": "clipped_gaussian",
        "D": D,
        "T": T,
        "n_val": 5,
        "n_test": 60,
        "sparsity": 3,
        "rkhs_norm": 1.0,
        "target_seed": target_seed,
    }
    return build_dataset(spec, np.random.default_rng(seed))


def _recovered_target(d) -> np.ndarray:
    a, *_ = np.linalg.lstsq(d.X_test, d.y_test, rcond=None)
    return a


def test_target_seed_fixes_the_target_across_T_and_repetitions():
    a1 = _recovered_target(_instance(20, seed=1))
    a2 = _recovered_target(_instance(50, seed=2))
    np.testing.assert_allclose(a1, a2, rtol=1e-9, atol=1e-12)
    # ... which the default draw (from training points) does not
    b1 = _recovered_target(_instance(20, seed=1, target_seed=None))
    b2 = _recovered_target(_instance(50, seed=2, target_seed=None))
    assert not np.allclose(b1, b2)
    # and its RKHS norm in k(x, x') = x.x'/D is rkhs_norm: |a.x|_H = sqrt(D) |a|
    assert math.sqrt(6) * np.linalg.norm(a1) == pytest.approx(1.0, rel=1e-9)


def test_the_best_in_ball_comparator_is_the_target_with_loss_zero():
    """Noise-free labels of a target with RKHS norm 1 = B: the best f in the ball fitted on
    the test split (the primal constrained least squares) has loss 0 to rounding, while a
    smaller ball (B = 0.5) cannot fit the labels."""
    d = _instance(20, seed=3, D=40)
    fmap = build_feature_map({"kind": "coordinate"}, d.X_train)
    Phi, c = fmap.primal(d.X_test)
    scale = 0.5 * float(np.mean(d.y_test**2))
    assert best_in_ball_loss_primal(Phi, c, d.y_test, 1.0) / len(d.y_test) < 1e-20 * max(scale, 1)
    assert best_in_ball_loss_primal(Phi, c, d.y_test, 0.5) / len(d.y_test) > 1e-3 * scale


# ---------------------------------------------------------------------------------------------
# the analysis


Ts = [2.0**j for j in range(4, 13)]


def _power(C: float, b: float) -> list[float]:
    """``epsilon(T) = C T^-b``."""
    return [C * T**-b for T in Ts]


@pytest.mark.parametrize("b, slope", [(0.5, 2.0), (0.25, 4.0), (1.0, 1.0)])
def test_a_power_law_gives_slope_one_over_b(b, slope):
    """``epsilon = C T^-b`` means ``T(epsilon) = (C / epsilon)^(1/b)``: log-log interpolation
    is exact for a power law, and the slope of T against 1/epsilon is 1/b."""
    C = 0.7
    eps = _power(C, b)
    targets = [eps[1] * 0.9, eps[3] * 1.1, eps[6], eps[8] * 1.01]
    got = [first_reach(Ts, eps, t)[0] for t in targets]
    np.testing.assert_allclose(got, [(C / t) ** (1 / b) for t in targets], rtol=1e-10)
    assert rate_slope(targets, got) == pytest.approx(slope, rel=1e-10)


def test_censored_unreached_and_diverged():
    eps = _power(1.0, 0.5)
    assert first_reach(Ts, eps, 1.0) == (16.0, True)  # the first grid T already reaches it
    T, cens = first_reach(Ts, eps, 1e-9)
    assert math.isnan(T) and not cens  # no grid T does
    inf = [math.inf] * len(Ts)
    assert math.isnan(first_reach(Ts, inf, 1.0)[0])  # a diverged pass reaches nothing
    table = reach_table(Ts, eps, [1.0, 0.1])
    assert table[0] == (1.0, 16.0, True) and table[1][2] is False
    with pytest.raises(ValueError):
        first_reach(Ts[::-1], eps, 0.1)


def test_first_reach_takes_the_first_crossing_of_a_curve_that_is_not_monotone():
    eps = [0.5, 0.2, 0.05, 0.3, 0.01, 0.01, 0.01, 0.01, 0.01]
    hit, _ = first_reach(Ts, eps, 0.1)
    # between T = 32 (0.2) and T = 64 (0.05): log T = log 32 + log 2 * log(2) / log(4)
    assert hit == pytest.approx(32 * 2**0.5)


def test_slope_over_repetitions_recovers_the_slope_with_an_interval():
    rng = np.random.default_rng(0)
    targets = [0.1, 0.05, 0.02, 0.01, 0.005]
    b = 0.5
    reps = {}
    for r in range(20):  # multiplicative noise on each repetition's curve
        reps[r] = (Ts, [e * math.exp(0.1 * rng.standard_normal()) for e in _power(1.0, b)])
    st = slope_over_repetitions({t: reps for t in targets})
    assert st["n"] == 20 and st["dropped"] == 0
    assert abs(st["mean"] - 2.0) < st["ci95"] + 0.05  # 1/b, within its interval (+ rounding)
    assert 0 < st["ci95"] < 0.5
    # exact power laws with different constants: every repetition has slope 1/b exactly
    exact = {r: (Ts, _power(1.0 + 0.1 * r, 0.25)) for r in range(3)}
    st = slope_over_repetitions({t: exact for t in [0.4, 0.3, 0.2]})
    assert st["mean"] == pytest.approx(4.0, rel=1e-9) and st["std"] == pytest.approx(0, abs=1e-9)


def test_slope_over_repetitions_reads_each_target_from_its_own_curves():
    """Doubly SGD under the paper's reading runs one setting per target: T(epsilon) is read
    from the curve of that epsilon's setting."""
    targets = [0.1, 0.02]
    curves = {
        0.1: {0: (Ts, [0.2 if T < 100 else 0.05 for T in Ts]), 1: (Ts, _power(1.0, 0.5))},
        0.02: {0: (Ts, [0.2 if T < 1000 else 0.005 for T in Ts]), 1: (Ts, _power(1.0, 0.5))},
    }
    st = slope_over_repetitions({t: curves[t] for t in targets})
    assert st["n"] == 2
    r0 = rate_slope(targets, [first_reach(*curves[t][0], t)[0] for t in targets])
    r1 = rate_slope(targets, [first_reach(*curves[t][1], t)[0] for t in targets])
    assert r1 == pytest.approx(2.0)  # epsilon = T^-1/2
    # its own crossings: 64 * 2^(log 4 / log 16) for 0.1, 512 * 2^(log 10 / log 40) for 0.02
    t1, t2 = 64 * 2**0.5, 512 * 2 ** (math.log(10) / math.log(40))
    assert r0 == pytest.approx(math.log(t2 / t1) / math.log(5))
    assert st["mean"] == pytest.approx((r0 + r1) / 2)


# ---------------------------------------------------------------------------------------------
# end to end


def test_rate_section_end_to_end(tmp_path):
    cfg = {
        "name": "rate_tiny",
        "seed": 0,
        "repetitions": 2,
        "dataset": {
            "kind": "clipped_gaussian",
            "D": 20,
            "T": [16, 32, 64],
            "n_val": 20,
            "n_test": 40,
            "sparsity": 3,
            "rkhs_norm": 1.0,
            "target_seed": 1,
        },
        "feature_map": {"kind": "coordinate"},
        "budget": {"match": "evaluations", "dsgd_k": 1},
        "evaluation": {"m_test": 10, "n_test_estimated": 10},
        "methods": {
            "shrinking_gradient": {"preset": "theory", "c": 0.05},
            "doubly_sgd": {
                "preset": ["grid", "dai"],
                "eta": [0.03, 0.1],
                "epsilon": [0.02, 0.01],
                "cap": [None, 0.03],
            },
        },
    }
    text = run_and_report(tmp_path, cfg)
    assert "## The rate claim against Doubly SGD" in text
    assert "| equals runs.csv |" in text and "| NO |" not in text
    for short in ("SG avg", "SG final", "DSGD Dai", "DSGD val"):
        assert f"| {short} |" in text, short
    assert "DSGD Dai literal diverged in" in text
    # the theory preset takes no budget: it is still set against the mean predictor
    assert "Shrinking Gradient: nothing to compare" not in text
    assert re.search(r"Shrinking Gradient: (beats|worse|not significantly|significantly)", text)
    # the final iterate is not what Corollary 1 bounds; the capped schedule θ/(t + θ/cap) with
    # θ = 1.5/ε ≥ 75 and cap = 0.03 has θ/cap ≥ 2,500 > T = 64: constant-step throughout
    assert "| SG final |" in text and "none (the bound is on the average) |" in text
    head = text.split("## Headline")[1].split("\n## ")[0]
    assert "SG avg against DSGD Dai" in head or "SG avg needs" in head
    assert (
        "**constant-step over the whole measured range**: θ/cap = 2,500–5,000 > the largest T = 64"
    ) in head
    const = pd.read_csv(tmp_path / "results" / "runs.csv")["test_loss_const"].mean()
    assert const < 0.01  # both targets lie above the mean predictor's loss, and it is said
    assert "Every target (ε = 0.02, 0.01) lies at or **above the mean predictor's" in head


def test_the_outcome_says_who_needs_more_examples_and_by_how_much():
    """T(ε) of the mean curves: SG avg 2,972 and 1,200 against DSGD Dai 1,348 and 500 (ratios
    2.2 and 2.4), one target not reached by DSGD val; censored reaches are not compared."""
    from ilnrun.report.sections.rate import outcome_text

    nan = math.nan
    summary = {
        "sg_avg": {"censored": [(1e-3, 1200.0, False), (5e-4, 2972.0, False)]},
        "dsgd_dai": {"censored": [(1e-3, 500.0, False), (5e-4, 1348.0, False)]},
        "dsgd_val": {"censored": [(1e-3, 16.0, True), (5e-4, nan, False)]},
    }
    text = outcome_text([summary], [1e-3, 5e-4])
    assert text.startswith(
        "SG avg needs 2.2–2.4× **more** examples than DSGD Dai at 2 of 2 (setting, ε) "
        "(2,972 against 1,348 at ε = 0.0005)"
    )
    assert "SG avg against DSGD val: no (setting, ε) reached by both inside the grid" in text
    summary["dsgd_dai"]["censored"][0] = (1e-3, 2400.0, False)
    assert "2× **fewer** at 1 of 2" in outcome_text([summary], [1e-3, 5e-4])
