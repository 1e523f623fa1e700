"""The statistics behind every table, band and verdict (ilnrun.stats), and selection and summary
(ilnrun.results), on hand-made numbers whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ilnrun.results import select, summarize
from ilnrun.stats import (
    claim_verdict,
    counted_verdict,
    mean_ci,
    paired_difference,
    paired_ratio,
    significant,
    t975,
    verdict_word,
)

# Two-sided 95% Student-t quantiles from printed tables (4 decimals)
TABLE = {1: 12.7062, 2: 4.3027, 5: 2.5706, 9: 2.2622, 30: 2.0423, 120: 1.9799}


@pytest.mark.parametrize(("df", "q"), TABLE.items())
def test_t975_matches_printed_tables(df, q):
    assert t975(df) == pytest.approx(q, abs=5e-5)


def test_t975_undefined_without_degrees_of_freedom():
    assert math.isnan(t975(0))


def test_mean_ci_by_hand():
    s = mean_ci([1.0, 2.0, 3.0, float("nan")])  # NaN left out
    assert s["n"] == 3 and s["mean"] == 2.0 and s["std"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    one = mean_ci([5.0])
    assert one["mean"] == 5.0 and math.isnan(one["std"]) and math.isnan(one["ci95"])
    assert mean_ci([])["n"] == 0


def test_paired_difference_pairs_by_repetition_and_drops_non_finite():
    a = pd.Series([1.0, 2.0, 4.0, np.inf], index=[0, 1, 2, 3])
    b = pd.Series([0.5, 1.0, 3.0, 1.0, 9.0], index=[2, 1, 0, 3, 4])  # other order, extra rep
    p = paired_difference(a, b)
    d = np.array([1.0 - 3.0, 2.0 - 1.0, 4.0 - 0.5])  # reps 0, 1, 2; rep 3 infinite, 4 unpaired
    assert p["n"] == 3 and p["mean"] == pytest.approx(d.mean())
    assert p["ci"] == pytest.approx(t975(2) * d.std(ddof=1) / math.sqrt(3))


@pytest.mark.parametrize(
    ("p", "word"),
    [
        ({"n": 10, "mean": -0.5, "ci": 0.1}, "SG lower (significant)"),
        ({"n": 10, "mean": -0.05, "ci": 0.1}, "SG lower (not significant)"),
        ({"n": 10, "mean": 0.5, "ci": 0.1}, "SG higher (significant)"),
        ({"n": 10, "mean": 0.05, "ci": 0.1}, "SG higher (not significant)"),
        ({"n": 1, "mean": 0.5, "ci": math.nan}, "SG higher (not significant)"),
        ({"n": 0, "mean": math.nan, "ci": math.nan}, "no data"),
    ],
)
def test_verdict_words(p, word):
    assert verdict_word(p, "SG") == word
    assert significant(p) == word.endswith("(significant)")


L_SIG, L_NS = "SG lower (significant)", "SG lower (not significant)"
H_SIG, H_NS = "SG higher (significant)", "SG higher (not significant)"


@pytest.mark.parametrize(
    ("words", "verdict"),
    [
        ([L_SIG, L_SIG], "holds"),
        ([L_SIG, L_NS], "holds in direction, not always significantly"),
        ([H_SIG, L_NS], "does not hold"),
        ([H_SIG, H_SIG], "does not hold"),
        ([H_NS, L_NS], "no significant difference"),
        ([L_SIG, H_SIG], "mixed"),
        (["no data", "no data"], "nothing to compare"),
        ([], "nothing to compare"),
        (["no data", L_SIG], "holds"),
    ],
)
def test_claim_verdicts(words, verdict):
    assert claim_verdict(words) == verdict


def _runs() -> pd.DataFrame:
    """Two settings of one learner over three repetitions; setting b has the lower mean
    validation loss, setting c is lower still but diverged once."""
    rows = []
    for i, (setting, vals, div) in enumerate(
        [
            ("a", [0.3, 0.3, 0.3], [False] * 3),
            ("b", [0.2, 0.1, 0.3], [False] * 3),
            ("c", [0.01, 0.01, np.inf], [False, False, True]),
        ]
    ):
        for rep, (v, d) in enumerate(zip(vals, div, strict=True)):
            rows.append(
                {
                    "method": "m",
                    "D": 5,
                    "dsgd_k": 2,
                    "setting": setting,
                    "repetition": rep,
                    "val_loss": v,
                    "test_loss": v + 1.0,
                    "online_loss": v,
                    "diverged": d,
                    "timed_out": False,
                    "cell_index": 3 * i + rep,
                    "train_evals": 10,
                    "features_sampled": 5,
                    "shrinks": 0,
                    "test_evals": 1,
                    "wall_s": 0.0,
                    "budget_match": "evaluations",
                    "budget_target": 10,
                }
            )
    return pd.DataFrame(rows)


def test_selection_lowest_mean_validation_loss_skipping_failed_settings():
    runs = select(_runs(), ["D"])
    assert set(runs.loc[runs["selected"], "setting"]) == {"b"}
    assert runs["selected"].sum() == 3


def test_selection_ties_go_to_the_first_cell():
    runs = _runs()
    runs.loc[runs["setting"] == "a", "val_loss"] = [0.2, 0.1, 0.3]  # same mean as b
    assert set(select(runs, ["D"]).query("selected")["setting"]) == {"a"}


def test_summary_of_the_selected_setting():
    summary = summarize(select(_runs(), ["D"]), ["D"])
    row = summary.iloc[0]
    assert row["setting"] == "b" and row["n"] == 3 and row["settings"] == 3
    assert row["diverged_cells"] == 1 and row["diverged_settings"] == 1
    assert row["test_loss_mean"] == pytest.approx(1.2)
    assert row["test_loss_ci95"] == pytest.approx(t975(2) * 0.1 / math.sqrt(3))


def test_summary_when_every_setting_failed():
    runs = _runs()
    runs["diverged"] = True
    summary = summarize(select(runs, ["D"]), ["D"])
    assert summary.iloc[0]["n"] == 0 and pd.isna(summary.iloc[0]["setting"])


# ----------------------------------------------------------------------------------------------
# the mean predictor as a yardstick, and log-log slopes


@pytest.mark.parametrize(
    ("words", "plain"),
    [
        (["X lower (significant)"] * 3, "beats the mean predictor"),
        (
            ["X higher (significant)", "X higher (not significant)"],
            "worse than predicting the mean",
        ),
        (["X higher (not significant)"], "not distinguishable from predicting the mean"),
        (["no data", "no data"], "nothing to compare"),
        ([], "nothing to compare"),
    ],
)
def test_against_mean_reads_the_claim_verdict_in_plain_words(words, plain):
    from ilnrun.stats import against_mean

    assert against_mean(words) == plain


def test_beats_mean_needs_a_significantly_negative_difference():
    from ilnrun.stats import beats_mean

    assert beats_mean({"n": 5, "mean": -1.0, "ci": 0.5})
    assert not beats_mean({"n": 5, "mean": -1.0, "ci": 2.0})
    assert not beats_mean({"n": 5, "mean": 1.0, "ci": 0.5})
    assert not beats_mean({"n": 0, "mean": math.nan, "ci": math.nan})


def test_loglog_slope_recovers_a_power_law_and_skips_non_positive_points():
    from ilnrun.stats import loglog_slope

    T = np.array([100.0, 200, 400, 800, 1600])
    assert loglog_slope(T, 3.0 * T**0.5) == pytest.approx(0.5, abs=1e-12)
    y = 2.0 * T**0.25
    y[0] = -1.0  # left out
    assert loglog_slope(T, y) == pytest.approx(0.25, abs=1e-12)
    assert math.isnan(loglog_slope([100.0, 200.0], [1.0, -1.0]))


def test_slope_interval_is_the_t_interval_of_per_repetition_slopes():
    """Per-repetition slopes of noisy power laws: the interval is t_{0.975, n-1} s / sqrt(n) of
    those slopes, and it covers the true exponent (seeded; with 20 repetitions and noise sd
    0.05 on log y over 5 points the slope's sd is 0.05 / sqrt(sum (log T - mean)^2) ~ 0.034,
    so the half-width is ~ 2.09 * 0.034 / sqrt(20) ~ 0.016; we allow 4 of those)."""
    from ilnrun.stats import loglog_slope, slope_interval

    rng = np.random.default_rng(0)
    T = np.array([100.0, 200, 400, 800, 1600])
    per = {r: (T, T**0.5 * np.exp(0.05 * rng.standard_normal(5))) for r in range(20)}
    per[99] = (T[:1], T[:1])  # one point: no slope, dropped
    s = slope_interval(per)
    slopes = np.array([loglog_slope(x, y) for r, (x, y) in per.items() if r != 99])
    assert s["n"] == 20 and s["dropped"] == 1
    assert s["mean"] == pytest.approx(slopes.mean())
    assert s["ci95"] == pytest.approx(t975(19) * slopes.std(ddof=1) / math.sqrt(20))
    assert abs(s["mean"] - 0.5) < 4 * 0.016
    assert abs(s["mean"] - 0.5) < s["ci95"] * 2


def test_regret_slope_windows_are_decades_the_last_decade_then_the_whole_range():
    from ilnrun.report.sections.theory import decades

    Ts = [100, 200, 400, 800, 1600, 3200]
    assert decades(Ts) == [(100.0, 1000.0), (1000.0, 10000.0), (320.0, 3200.0), (100, 3200)]
    # the last decade [40, 400] holds the same T as [100, 1000]: not repeated
    assert decades([100, 200, 400]) == [(100.0, 1000.0), (100, 400)]
    assert decades([1000, 10000]) == [(1000.0, 10000.0)]  # one decade is the whole range
    assert decades([100]) == []


# ----------------------------------------------------------------------------------------------
# scale-free verdicts: log ratios, their t-test, Holm, and the minimum number of repetitions


def test_t_test_p_matches_the_student_t_distribution():
    from scipy import stats as sst

    from ilnrun.stats import t_test_p

    x = np.log([0.5, 0.7, 0.6, 0.9, 0.4, 0.8])
    ref = sst.ttest_1samp(x, 0.0).pvalue
    assert t_test_p(float(x.mean()), float(x.std(ddof=1)), len(x)) == pytest.approx(ref)
    assert math.isnan(t_test_p(0.1, math.nan, 1))
    assert t_test_p(0.3, 0.0, 4) == 0.0 and t_test_p(0.0, 0.0, 4) == 1.0


def test_holm_adjusts_in_the_input_order_and_skips_untested():
    from ilnrun.stats import holm

    adj = holm([0.01, 0.04, 0.03, math.nan, 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 over m = 4: 4·0.01, 3·0.03, max(0.09, 2·0.04), max(., 0.5)
    assert adj[:3] == pytest.approx([0.04, 0.09, 0.09]) and math.isnan(adj[3])
    assert adj[4] == pytest.approx(0.5)
    assert holm([0.3, 0.2]) == pytest.approx([0.4, 0.4])  # monotone in the sorted order
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_paired_ratio_gives_the_paired_t_test_and_counts_diverged_sides():
    from scipy import stats as sst

    a = pd.Series([1.0, 2.0, 3.0, 4.0, np.inf, 1.0])
    b = pd.Series([2.0, 3.0, 4.0, 5.0, 1.0, np.inf])
    p = paired_ratio(a, b)
    logs = np.log([0.5, 2 / 3, 0.75, 0.8])
    assert p["n"] == 4 and p["a_inf"] == 1 and p["b_inf"] == 1
    assert p["ratio"] == pytest.approx(math.exp(logs.mean()))
    assert p["p"] == pytest.approx(sst.ttest_1samp(logs, 0.0).pvalue)
    # scale-free: multiplying both learners' losses at one repetition changes nothing
    a2, b2 = a.copy(), b.copy()
    a2[0], b2[0] = 1000 * a[0], 1000 * b[0]
    assert paired_ratio(a2, b2)["p"] == pytest.approx(p["p"])


def test_ratio_words_need_the_minimum_repetitions_and_use_the_holm_p():
    from ilnrun.stats import MIN_REPETITIONS, TOO_FEW, ratio_word

    base = {"ratio": 0.6, "p": 0.001}
    assert ratio_word({**base, "n": MIN_REPETITIONS - 1, "p_holm": 0.001}) == TOO_FEW
    n = MIN_REPETITIONS
    assert ratio_word({**base, "n": n, "p_holm": 0.01}) == "SG lower (significant)"
    # the raw p is 0.001, the adjusted one 0.2: not significant
    assert ratio_word({**base, "n": n, "p_holm": 0.2}) == "SG lower (not significant)"
    assert ratio_word({"n": n, "ratio": 3.0, "p_holm": 0.0}) == "SG higher (significant)"
    assert ratio_word({"n": 0, "ratio": math.nan}) == "no data"
    assert counted_verdict([TOO_FEW, TOO_FEW], "D") == f"no verdict (fewer than {n} repetitions)"
    assert counted_verdict([L_SIG, L_NS, TOO_FEW], "D") == (
        "holds in direction, not always significantly (significantly lower at 1 of 2 D, "
        f"no significant difference at 1; 1 D with fewer than {n} repetitions)"
    )


def test_a_mixed_setting_without_a_significant_loss_holds_in_part_with_counts():
    words = [L_SIG, L_SIG, "SG higher (not significant)", L_NS]
    assert counted_verdict(words, "T") == (
        "holds in part (significantly lower at 2 of 4 T, no significant difference at 2)"
    )


def test_a_direction_without_significance_is_no_significant_difference():
    assert claim_verdict([L_NS, L_NS]) == "no significant difference"
    assert counted_verdict([L_NS, L_NS, L_NS], "T") == "no significant difference"


def test_paired_ratio_with_a_repeated_repetition_has_nothing_to_compare():
    """Rows of one repetition under two settings on one side (e.g. the rate experiment's data
    settings when only the budget is fixed) pair with nothing: no ratio, no traceback."""
    import pandas as pd

    from ilnrun.stats import paired_ratio

    a = pd.Series([1.0, 2.0], index=[0, 0])
    for b in (pd.Series([], dtype=float), pd.Series([1.0], index=[0])):
        p = paired_ratio(a, b)
        assert p["n"] == 0 and math.isnan(p["ratio"])
