"""The headline's "Shrinking Gradient against the best competitor" line on hand-made runs: the
competitor with the lowest mean test NMSE is named, the ratio and word are those of the
verdict table's cell (geometric mean of the paired ratios, Holm-adjusted word)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ilnrun.report.data import KERNEL, ReportData
from ilnrun.report.sections.best import headline_lines
from ilnrun.stats import paired_ratio

N = 6  # repetitions: enough for a verdict word (MIN_REPETITIONS = 5)
SG, DSGD, FR = "shrinking_gradient", "doubly_sgd", "fixed_random"


def _report(factor: dict[str, float], xs=(None,)) -> ReportData:
    """Runs at budget k = 1 where each learner's test loss is ``factor`` times a per-repetition
    base loss, with a fixed noise (seeded) on Shrinking Gradient's; NMSE = loss (var 1)."""
    rng = np.random.default_rng(0)
    rows = []
    for x in xs:
        base = rng.uniform(0.5, 1.5, N)
        noise = np.exp(rng.normal(0.0, 0.05, N))
        for m, f in factor.items():
            loss = base * f * (noise if m == SG else 1.0)
            for rep in range(N):
                row = {"method": m, "dsgd_k": 1, "repetition": rep, "selected": True}
                row |= {"test_loss": loss[rep], "test_nmse": loss[rep], "online_loss": loss[rep]}
                row |= {"setting": "eta=1"}
                row |= {"diverged": False, "timed_out": False} | ({"T": x} if x else {})
                rows.append(row)
    runs = pd.DataFrame(rows)
    r = object.__new__(ReportData)  # the attributes the line reads
    r.runs, r.cfg, r._views = runs, {"evaluation": {}, "methods": {}}, {}
    r.summary = runs.groupby(["method", "dsgd_k"] + (["T"] if xs[0] else []), as_index=False)[
        "test_nmse"
    ].mean()
    r.methods = r.compared = list(factor)
    r.proposed, r.batch, r.ks, r.repetitions = [SG], [], [1], N
    r.xa, r.xs = ("T", list(xs)) if xs[0] else (None, [None])
    return r


def test_the_best_competitor_is_the_lowest_mean_nmse_and_its_cell_is_the_verdict_table_s():
    r = _report({SG: 1.5, DSGD: 2.0, FR: 1.0})
    assert r.best_competitor(SG, 1, None, KERNEL)[0] == FR
    (line,) = headline_lines(r, {KERNEL: "with the kernel"})
    sg = r.runs[r.runs["method"] == SG].set_index("repetition")["test_loss"]
    fr = r.runs[r.runs["method"] == FR].set_index("repetition")["test_loss"]
    ratio = paired_ratio(sg, fr)["ratio"]
    assert math.isclose(ratio, 1.5, rel_tol=0.1)  # 0.05 log-noise over 6 repetitions
    assert line.startswith("- Shrinking Gradient against the best competitor at k = 1, with ")
    assert "Fixed-Random (the lowest mean test NMSE" in line
    assert f"{ratio:.3g}×" in line and line.endswith("**does not hold**.")


def test_several_x_values_are_counted_and_a_changing_competitor_is_named_at_each():
    r = _report({SG: 0.5, DSGD: 1.0, FR: 1.2}, xs=(100, 200))
    r.runs.loc[(r.runs["method"] == FR) & (r.runs["T"] == 200), "test_nmse"] = 0.1
    (line,) = headline_lines(r, {KERNEL: "with the kernel"})
    assert "per T, the competitor with the lowest mean test NMSE" in line
    assert "T = 100: Doubly SGD, " in line and "T = 200: Fixed-Random, " in line
    assert line.endswith("**holds**.")  # significantly lower at both T: no counts needed


def test_a_run_without_a_competitor_says_so_once():
    r = _report({SG: 1.0})
    assert headline_lines(r, {KERNEL: "with the kernel"}) == [
        "- Shrinking Gradient against the best competitor: none (no other budgeted learner ran)."
    ]
