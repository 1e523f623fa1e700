"""Verdicts of the proposed learner against each competitor on a scale-free statistic
(docs/protocol.md §7): per-repetition loss ratios, paired, with a 95% interval; Holm–Bonferroni
over every comparison of the report's verdict tables; no verdict word below the minimum number
of repetitions."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, tiny_config, write_config
from scipy import stats as st

from ilnrun.report.data import FREE, KERNEL, ReportData
from ilnrun.stats import MIN_REPETITIONS, holm


@pytest.fixture(scope="module")
def five(tmp_path_factory) -> tuple[Path, str]:
    """The tiny experiment with the minimum number of repetitions, reported."""
    base = tmp_path_factory.mktemp("verdicts")
    path = write_config(base / "five.yaml", tiny_config(repetitions=MIN_REPETITIONS))
    out = base / "results"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    res = invoke(["report", out])
    assert res.exit_code == 0, res.output
    return out, (out / "REPORT.md").read_text()


def _hand(runs: pd.DataFrame, other: str, D: int, metric: str) -> np.ndarray:
    """Per-repetition log(metric(SG) / metric(other)) at the selected settings, by hand."""
    sel = runs[runs["selected"] & (runs["D"] == D)]
    a = sel[sel["method"] == "shrinking_gradient"].set_index("repetition")[metric]
    b = sel[sel["method"] == other].set_index("repetition")[metric]
    return np.log((a / b).to_numpy(float))


def test_cells_are_paired_log_ratios_and_words_use_holm_over_the_report(five, tmp_path):
    out, text = five
    runs = pd.read_csv(out / "runs.csv")
    r = ReportData(out, tmp_path)
    family = r.verdict_family()
    cells = [p for rows in family.values() for *_, ps in rows for p in ps]
    # the number of comparisons: every cell of both protocols' tables, said in the report
    assert r.n_comparisons == len(cells) == 20
    assert "This report's verdict tables make **20 comparisons**" in text
    assert "20 paired t-tests over all verdict tables" in text.split("## Setup")[0]
    # Holm over the whole family, by hand
    hand_p = []
    for other in ("doubly_sgd", "fixed_random"):
        for D in (20, 40):
            logs = _hand(runs, other, D, "test_loss")
            hand_p.append(st.ttest_1samp(logs, 0.0).pvalue)
            h = st.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
            p = family[(KERNEL, "test_loss", None)][0 if other == "doubly_sgd" else 1][3]
            p = p[0 if D == 20 else 1]
            assert p["ratio"] == pytest.approx(math.exp(logs.mean()), rel=1e-12)
            assert (p["lo"], p["hi"]) == pytest.approx(
                (math.exp(logs.mean() - h), math.exp(logs.mean() + h)), rel=1e-9
            )
            # on the same test points the loss ratio is the NMSE ratio
            nmse = _hand(runs, other, D, "test_nmse")
            assert nmse == pytest.approx(logs, rel=1e-9)
    assert [p["p"] for p in cells[:4]] == pytest.approx(hand_p, rel=1e-9)
    adjusted = holm([p["p"] for p in cells])
    assert [p["p_holm"] for p in cells] == pytest.approx(adjusted)
    for *_, ps, verdict in r.verdict_rows("test_loss", None, KERNEL):
        for p in ps:  # a significant word iff the adjusted p is below 0.05
            assert p["n"] == MIN_REPETITIONS
        sig = sum(p["p_holm"] < 0.05 for p in ps)
        if sig == 0:
            assert verdict == "no significant difference"
        elif sig == len(ps) and all(p["ratio"] < 1 for p in ps):
            assert verdict == "holds"
        else:
            assert re.search(r"\(significantly (lower|higher) at \d of 2 D", verdict), verdict
    # each table has the Holm column, per D
    assert text.count("| Holm-adjusted p (per D) | verdict |") == 5


def test_the_verdict_is_scale_free(five, tmp_path):
    """Multiplying every loss of one repetition (both learners, every setting) by 1000 changes
    no ratio, p-value or word: the raw-difference verdicts were dominated by such a repetition."""
    out, _ = five
    r0 = ReportData(out, tmp_path / "a")
    scaled = tmp_path / "scaled"

    shutil.copytree(out, scaled)
    runs = pd.read_csv(scaled / "runs.csv")
    rep0 = runs["repetition"] == 0
    for col in ("test_loss", "online_loss", "test_loss_estimated", "test_loss_subset"):
        runs.loc[rep0, col] *= 1000
    runs.to_csv(scaled / "runs.csv", index=False)
    r1 = ReportData(scaled, tmp_path / "b")
    for key in r0.verdict_plan():
        a, b = r0.verdict_rows(key[1], key[2], key[0]), r1.verdict_rows(key[1], key[2], key[0])
        for (*_, pa, va), (*_, pb, vb) in zip(a, b, strict=True):
            assert va == vb
            assert [p["ratio"] for p in pa] == pytest.approx([p["ratio"] for p in pb])
            assert [p["p_holm"] for p in pa] == pytest.approx([p["p_holm"] for p in pb])


def test_below_the_minimum_repetitions_the_numbers_without_a_word(five, tmp_path):
    """The same results cut to MIN_REPETITIONS − 1 repetitions: ratios and intervals, no word,
    and the report says how many repetitions a verdict needs."""
    out, _ = five

    cut = tmp_path / "cut"
    shutil.copytree(out, cut)
    runs = pd.read_csv(cut / "runs.csv")
    runs[runs["repetition"] < MIN_REPETITIONS - 1].to_csv(cut / "runs.csv", index=False)
    assert invoke(["report", cut, "--out", tmp_path / "rep"]).exit_code == 0
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    n = MIN_REPETITIONS - 1
    assert f"This run has {n} repetitions, fewer than the {MIN_REPETITIONS} a verdict needs" in text
    assert f"({n} repetitions: a verdict needs {MIN_REPETITIONS})" in text
    r = ReportData(cut, tmp_path / "r")
    for mode in (KERNEL, FREE):
        for *_, ps, verdict in r.verdict_rows("test_loss", None, mode):
            assert verdict == f"no verdict (fewer than {MIN_REPETITIONS} repetitions)"
            assert all(p["n"] == n and np.isfinite(p["lo"]) for p in ps)
    for word in ("**holds", "**does not hold", "**mixed", "**no significant difference"):
        assert word not in text
