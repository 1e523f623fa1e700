"""Report pieces of the yardsticks, on hand-made inputs: the note on two compared learners that
are both worse than the mean, the grid-edge flag, and the mark in a table cell."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from ilnrun.report.data import ReportData
from ilnrun.report.sections.verdicts import mean_note

WORSE = "worse than predicting the mean"


def _stub(rows):
    return SimpleNamespace(has_const=True, mean_rows=lambda metric: rows)


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
    assert [row[0] for row in out] == ["100–800", "1,600–3,200", "100–3,200 (all)"]
    for row in out:
        assert row[2].startswith("0.5 ± ")  # fmt: mean ± ci, ci ~ 0
        lo, hi = (float(v) for v in row[3].strip("[]").split(","))
        assert np.isclose(lo, 0.5, atol=1e-9) and np.isclose(hi, 0.5, atol=1e-9)
    assert out[0][4] == "4"
