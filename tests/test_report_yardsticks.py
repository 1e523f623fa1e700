"""Report pieces of the yardsticks, on hand-made inputs: the note on two compared learners that
are both worse than the mean, the grid-edge flag, and the mark in a table cell."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ilnrun.report.data import ReportData
from ilnrun.report.sections.verdicts import mean_note

WORSE = "worse than predicting the mean"


def _stub(rows):
    return SimpleNamespace(has_const=True, mean_rows=lambda metric, mode=None: rows)


def test_both_learners_worse_than_the_mean_is_said_in_plain_words():
    rows = [("a", 2, [], WORSE), ("b", 2, [], WORSE), ("b", 4, [], "beats the mean predictor")]
    assert mean_note(_stub(rows), "a", "b", 2) == "both learners are worse than predicting the mean"
    note = mean_note(_stub([("a", 4, [], WORSE), *rows[2:]]), "a", "b", 4)
    assert WORSE in note and "beats the mean predictor" in note


def test_a_selected_value_at_the_edge_of_its_grid_is_flagged():
    r = object.__new__(ReportData)  # only the attributes edges() reads
    r.cfg = {"methods": {"m": {"eta": [0.1, 0.3, 1.0], "schedule": ["constant", "inv_sqrt"]}}}
    r.compared, r.xa = ["m"], None
    r.summary = pd.DataFrame(
        {"method": ["m", "m", "m"], "dsgd_k": [1, 1, 2], "eta": [1.0, 0.3, 0.3]}
    )
    assert r.edges("m", 1) == ["eta=1 (largest of the grid)"]
    assert r.edges("m", 2) == []


def test_regret_slope_rows_per_decade_with_t_intervals():
    """Per-repetition regrets R = a_r T^0.5 (a_r varies, the exponent does not): every window's
    slope is 0.5 with a zero-width interval; a repetition with a non-positive regret in a
    window keeps its other points."""
    import numpy as np

    from ilnrun.report.sections.theory import slope_rows

    Ts = [100, 200, 400, 800, 1600, 3200]
    rows = [{"T": T, "repetition": r, "regret": (1 + r) * T**0.5} for r in range(4) for T in Ts]
    rows[0]["regret"] = -1.0  # repetition 0 at T = 100
    out = slope_rows(pd.DataFrame(rows))
    assert [row[0] for row in out] == [
        "100–800",
        "1,600–3,200",
        "400–3,200 (last decade)",
        "100–3,200 (all)",
    ]
    for row in out:
        assert row[2].startswith("0.5 ± ")  # fmt: mean ± ci, ci ~ 0
        lo, hi = (float(v) for v in row[3].strip("[]").split(","))
        assert np.isclose(lo, 0.5, atol=1e-9) and np.isclose(hi, 0.5, atol=1e-9)
    assert out[0][4] == "4"


def test_the_last_decade_is_its_own_window_or_named_on_the_decade_it_equals():
    """T = 100 ... 100 000 in 1-2-5 steps: the last decade [10^4, 10^5] is a decade window, so
    it is named there and not repeated; T = 100 ... 20 000: it is [2 000, 20 000]."""
    from ilnrun.report.sections.theory import slope_rows

    def labels(Ts):
        rows = [{"T": T, "repetition": r, "regret": (1 + r) * T**0.7} for r in range(3) for T in Ts]
        return [row[0] for row in slope_rows(pd.DataFrame(rows))]

    Ts = [100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
    assert labels(Ts) == [
        "100–1,000",
        "1,000–10,000",
        "10,000–100,000 (last decade)",
        "100–100,000 (all)",
    ]
    assert labels(Ts[:8])[-2:] == ["2,000–20,000 (last decade)", "100–20,000 (all)"]


def test_rate_sentences_put_a_linear_regret_against_B_sqrt_T():
    """R_T = r T with r = 1e-4 (slope 1, every repetition): below B√T = √T up to T = 1e5 (at
    most 1.015e-4 √1e5 = 0.0321 B√T), every window's interval above ½, and a linear regret at that
    rate crosses B√T at T* = (B / r)² = 1e8, 1e3 × the largest T."""
    from ilnrun.report.sections.theory import headline_clause, rate_sentences

    Ts = [100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
    g = pd.DataFrame(
        [
            {
                "T": T,
                "repetition": r,
                "regret": 1e-4 * T * (1 + 0.01 * r),
                "test_loss_zero": 2e-4,
                "test_loss_const": 5e-5,
            }
            for r in range(4)
            for T in Ts
        ]
    )
    text = " ".join(rate_sentences(g, 1.0))
    assert "**below** B√T at every T, at most 0.0321 B√T (T = 100,000)" in text
    assert text.count("above ½") == 4 and "consistent with ½" not in text
    assert (
        "R_T / T = 0.000102" in text and "T* = (B / (R_T/T))² ≈ 9.7e+07, 971× the largest T" in text
    )
    assert (
        "the zero predictor's 0.0002, the mean predictor's 5e-05; R_T / T is 0.51× the zero" in text
    )
    assert "2× the mean predictor's." in text
    clause = headline_clause(g, 1.0)
    assert "10,000–100,000 (last decade): **1.000** [" in clause
    assert "100–100,000 (all): **1.000** [" in clause
    assert "4 of the 4 windows exclude ½" in clause
    assert "The mean regret is at most 0.0321 B√T over all T." in clause
    # predicting the mean costs 1e5 · 5e-5 = 5 over the pass, 63× below B√T = 316
    assert "predicting the mean costs ≈ 5 (T × its test loss), 63× below B√T = 316" in clause
    assert "**vacuous** at these T" in clause
    # a regret above B√T is said so, with the T where it is
    g["regret"] = 2 * np.sqrt(g["T"]) * (1 + 0.1 * np.sin(g["T"] + g["repetition"]))
    text = " ".join(rate_sentences(g, 1.0))
    assert "**not below** B√T" in text and "above it at T = 100, 200," in text
    assert text.count("consistent with ½") == 4 and "past it the regret exceeds B√T" in text


def test_setting_slopes_are_compared_paired_by_repetition():
    """Two settings with R = a_r T^0.5 and R = a_r T^0.7: the difference is 0.2 in every window
    and significant; the same exponent twice gives 0 and not significant."""
    from ilnrun.report.sections.theory import setting_slope_rows

    Ts = [100, 200, 500, 1000, 2000]

    def g(p):
        return pd.DataFrame(
            [{"T": T, "repetition": r, "regret": (1 + r) * T**p} for r in range(4) for T in Ts]
        )

    rows = setting_slope_rows([("c=0.01", g(0.5)), ("c=0.1", g(0.7))])
    assert [row[0] for row in rows] == [
        "100–1,000",
        "1,000–2,000",
        "200–2,000 (last decade)",
        "100–2,000 (all)",
    ]
    assert all(row[1] == "c=0.1 − c=0.01" and row[2].startswith("0.2") for row in rows)
    assert all(row[4] == "yes" for row in rows)
    noise = g(0.5)
    noise["regret"] *= 1 + 0.05 * np.sin(noise["T"] + noise["repetition"])
    rows = setting_slope_rows([("a", g(0.5)), ("b", noise)])
    assert all(row[4] == "no" for row in rows)


def test_the_theorem1_headline_never_calls_an_interval_holding_0_consistent_with_half():
    """The referee's case: the last decade's slope 0.23 [−0.08, 0.55] holds both ½ and 0, while
    the other windows exclude ½. The headline gives every window's slope with its interval,
    says which exclude ½, calls none "consistent with ½", and puts c against the proof's."""
    from ilnrun.report.sections.theory import against_half, headline_clause, proof_c

    assert against_half({"n": 5, "ci95": 0.32, "mean": 0.233, "lo": -0.084, "hi": 0.551}) == (
        "contains ½ and 0"
    )
    assert against_half({"n": 5, "ci95": 0.1, "mean": 0.5, "lo": 0.4, "hi": 0.6}) == (
        "consistent with ½"
    )
    rng = np.random.default_rng(0)
    Ts = [1000, 2000, 5000, 10000, 20000, 50000, 100000]
    rows = []
    for rep in range(10):
        noise = rng.normal(0, 0.25, len(Ts))
        for T, e in zip(Ts, noise, strict=True):
            # slope 1.2 up to 10⁴, then 0.23 with three times the noise (the referee's case)
            if T <= 10000:
                base = (T / 1000) ** 1.2
            else:
                base, e = 10**1.2 * (T / 10000) ** 0.23, 3 * e
            rows.append(
                {"T": T, "repetition": rep, "regret": base * math.exp(e), "test_loss_const": 2e-4}
            )
    g = pd.DataFrame(rows)
    clause = headline_clause(g, 1.0, "preset=theory,c=0.01,B=1.0")
    assert "consistent with ½" not in clause
    assert "(last decade)" in clause and "contains ½ and 0" in clause
    assert "1,000–10,000: **1.163** [1.070, 1.256], above ½" in clause
    assert "2 of the 3 windows exclude ½ (1,000–10,000; 1,000–100,000 (all))" in clause
    assert "**vacuous**" in clause  # the mean predictor costs 20 over 10⁵ rounds, B√T = 316
    cp = proof_c(1.0, 100000)
    assert f"c = 0.01 is {0.01 / cp:.2g}× the constant the proof" in clause
    # docs/algorithms.md §1.5: c ≈ 890 at B = 1, T = 200 and ≈ 780 at T = 3200
    assert proof_c(1.0, 200) == pytest.approx(890, rel=0.01)
    assert proof_c(1.0, 3200) == pytest.approx(780, rel=0.01)


def test_a_theory_run_reports_every_window_the_vacuity_and_c(tmp_path):
    """A tiny T sweep of the theory preset through ``ilnrun report``: the headline gives the
    slopes with intervals per window (no "last decade" alone), whether a regret bound of order
    B√T is vacuous against predicting the mean, and c against the proof's constant."""
    from conftest import invoke, tiny_config, write_config

    from ilnrun.report.sections.theory import proof_c

    cfg = tiny_config(
        **{
            "dataset.T": [20, 40, 80],
            "dataset.D": 30,
            "evaluation.regret_B": 1.0,
            "budget.dsgd_k": 2,
            "repetitions": 3,
            "methods": {"shrinking_gradient": {"preset": "theory", "c": 0.2}},
        }
    )
    path = write_config(tmp_path / "th.yaml", cfg)
    out = tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    assert invoke(["report", out, "--out", tmp_path / "rep"]).exit_code == 0
    head = (tmp_path / "rep" / "REPORT.md").read_text().split("## Headline")[1].split("\n## ")[0]
    line = next(x for x in head.splitlines() if "preset=theory" in x)
    assert "per T-window (95% interval over repetitions" in line and "20–80 (all): **" in line
    runs = pd.read_csv(out / "runs.csv")
    cost = 80 * runs.loc[runs["T"] == 80, "test_loss_const"].mean()
    assert ("**vacuous**" in line) == (cost < math.sqrt(80))
    assert f"c = 0.2 is {0.2 / proof_c(1.0, 80):.2g}× the constant the proof" in line
