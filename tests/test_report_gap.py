"""The report's gap to the batch fit (paired ratios with an interval), the yardstick printed
beside every comparison with the mean predictor, verdict words that count the data settings,
the setting of a learner without parameters, and the theory preset's grid line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, tiny_config, write_config

from ilnrun.report.data import ReportData
from ilnrun.stats import (
    against_mean_counted,
    claim_verdict,
    counted_verdict,
    fmt_ratio,
    paired_ratio,
    t975,
)

L_SIG, L_NS = "X lower (significant)", "X lower (not significant)"
H_SIG, H_NS = "X higher (significant)", "X higher (not significant)"


# ----------------------------------------------------------------------------------------------
# statistics


def test_paired_ratio_is_the_geometric_mean_with_a_t_interval_on_log_ratios():
    a = pd.Series([0.4, 0.9, 0.3, np.inf], index=[0, 1, 2, 3])
    b = pd.Series([0.1, 0.3, 0.1, 0.2], index=[0, 1, 2, 3])  # repetition 3: a diverged
    p = paired_ratio(a, b)
    logs = np.log([4.0, 3.0, 3.0])
    h = t975(2) * logs.std(ddof=1) / math.sqrt(3)
    assert p["n"] == 3
    assert p["ratio"] == pytest.approx(math.exp(logs.mean()))
    assert p["lo"] == pytest.approx(math.exp(logs.mean() - h))
    assert p["hi"] == pytest.approx(math.exp(logs.mean() + h))
    assert p["lo"] < p["ratio"] < p["hi"]
    # a constant ratio has a zero-width interval; pairing is by repetition, not by position
    q = paired_ratio(pd.Series([2.0, 6.0], index=[1, 0]), pd.Series([3.0, 1.0], index=[0, 1]))
    assert (q["ratio"], q["lo"], q["hi"]) == pytest.approx((2.0, 2.0, 2.0))
    assert fmt_ratio(q) == "2× [2, 2]"
    assert fmt_ratio(paired_ratio(pd.Series([1.0]), pd.Series([0.5]))) == "2×"
    assert fmt_ratio(paired_ratio(pd.Series(dtype=float), pd.Series(dtype=float))) == "—"
    assert (
        fmt_ratio({"n": 3, "ratio": 2140.0, "lo": 1000.0, "hi": 4770.4}) == "2,140× [1,000, 4,770]"
    )


@pytest.mark.parametrize(
    ("words", "verdict"),
    [
        ([L_SIG, L_NS, H_NS], "holds in part"),  # one significant win, no loss: not "mixed"
        ([L_SIG, H_SIG, L_NS], "mixed"),
    ],
)
def test_one_significant_win_and_no_loss_is_not_mixed(words, verdict):
    assert claim_verdict(words) == verdict


def test_claim_verdicts_count_the_settings():
    assert counted_verdict([L_SIG, L_NS, H_NS], "D") == (
        "holds in part (significantly lower at 1 of 3 D, no significant difference at 2)"
    )
    assert counted_verdict([L_SIG, L_SIG], "D") == "holds"
    assert counted_verdict([L_NS, H_NS], "D") == "no significant difference"
    assert (
        counted_verdict([H_SIG, L_NS], "k")
        == "does not hold (significantly higher at 1 of 2 k, no significant difference at 1)"
    )
    assert counted_verdict([L_SIG, H_SIG, L_NS, H_NS], "T") == (
        "mixed (significantly lower at 1 of 4 T, higher at 1, no significant difference at 2)"
    )
    assert counted_verdict([H_SIG], "D") == "does not hold"  # one setting: the plain word


@pytest.mark.parametrize(
    ("words", "plain"),
    [
        (
            [H_SIG] + [H_NS] * 2 + [L_NS] * 3,
            "significantly worse than the mean predictor at 1 of 6 D, better at none",
        ),
        (
            [L_SIG] + [L_NS] * 4 + [H_NS],
            "significantly better than the mean predictor at 1 of 6 D, worse at none",
        ),
        (
            [L_SIG] * 2 + [H_SIG] * 2,
            "significantly worse than the mean predictor at 2 of 4 D, better at 2",
        ),
        ([L_SIG] * 3, "beats the mean predictor at all 3 D"),
        ([H_SIG] * 2 + ["no data"], "worse than predicting the mean at all 2 D"),
        ([L_NS, H_NS], "not significantly different from the mean predictor at any of the 2 D"),
        ([H_SIG], "worse than predicting the mean"),
        (["no data"], "nothing to compare"),
    ],
)
def test_against_the_mean_counts_the_data_settings(words, plain):
    assert against_mean_counted(words, "D") == plain


# ----------------------------------------------------------------------------------------------
# a report with a batch reference


@pytest.fixture(scope="module")
def batch_report(tmp_path_factory) -> tuple[Path, str]:
    """The tiny experiment (2 D, 3 repetitions) with kernel ridge regression, reported."""
    base = tmp_path_factory.mktemp("gap")
    cfg = tiny_config(repetitions=3)
    cfg["methods"]["kernel_ridge"] = {"ridge": [1e-3, 1e-2]}
    cfg["evaluation"]["n_test_estimated"] = 25
    path = write_config(base / "gap.yaml", cfg)
    out = base / "results"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    res = invoke(["report", out])
    assert res.exit_code == 0, res.output
    return out, (out / "REPORT.md").read_text()


def _ratio_by_hand(runs: pd.DataFrame, method: str, D: int) -> tuple[float, float, float]:
    """The gap recomputed from runs.csv without the report's code."""
    sel = runs[runs["selected"] & (runs["D"] == D)]
    a = sel[sel["method"] == method].set_index("repetition")["test_nmse"]
    b = sel[sel["method"] == "kernel_ridge"].set_index("repetition")["test_nmse"]
    logs = np.log((a / b).to_numpy())
    h = t975(len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    return math.exp(logs.mean()), math.exp(logs.mean() - h), math.exp(logs.mean() + h)


def test_the_gap_to_the_batch_fit_is_stated_and_recomputes(batch_report):
    out, text = batch_report
    runs = pd.read_csv(out / "runs.csv")
    headline = text.split("## Headline")[1].split("\n## ")[0]
    assert (
        "Gap to the batch fit at k = 4, with the closed-form kernel (Kernel ridge regression"
        in headline
    )
    assert "each learner's test NMSE as a multiple of it" in headline
    # verdicts against the mean predictor count the 2 data settings, never a blanket word
    assert "against the mean predictor (exact test loss, counted over the 2 D; " in headline
    assert "worse than predicting the mean;" not in headline
    assert "mixed against the mean predictor" not in headline
    assert "## Verdict" in text and "**Gap to the batch fit" in text
    table = text.split("**Gap to the batch fit")[1].split("\n\n**")[0]
    yard = next(line for line in table.splitlines() if "(the yardstick)" in line)
    krr = runs[runs["selected"] & (runs["method"] == "kernel_ridge")]
    for D, cell in zip((20, 40), yard.split("|")[3:5], strict=True):
        assert float(cell.split("±")[0]) == pytest.approx(
            krr.loc[krr["D"] == D, "test_nmse"].mean(), rel=1e-3
        )
    for method, name in (
        ("shrinking_gradient", "Shrinking Gradient"),
        ("kernel_ogd", "Kernel OGD"),
    ):
        line = next(x for x in table.splitlines() if x.startswith(f"| {name}"))
        cells = line.split("|")[3:5]
        for D, cell in zip((20, 40), cells, strict=True):
            ratio, lo, hi = (
                float(v) for v in re.findall(r"[\d.]+(?:e[+-]?\d+)?", cell.replace(",", ""))
            )
            want = _ratio_by_hand(runs, method, D)
            assert (ratio, lo, hi) == pytest.approx(want, rel=2e-3), (method, D, cell)
    # kernel ridge is not divided by itself
    assert "Kernel ridge regression (exact kernel, batch) ÷" not in table


def test_every_comparison_with_the_mean_prints_its_yardstick(batch_report):
    """The Algorithm-2 rows (first n_test_estimated = 25 test points) come with the mean
    predictor's loss on those 25 points, which the runs carry as test_loss_const_subset."""
    out, text = batch_report
    runs = pd.read_csv(out / "runs.csv")
    against = text.split("**Test loss against the mean predictor**")[1]
    rows = against.split("\n\n")[1].splitlines()
    full = next(r for r in rows if "mean predictor's test loss on all test points" in r)
    sub = next(r for r in rows if "on the first 25 test points, where the Algorithm-2" in r)
    assert rows.index(sub) > rows.index(full)
    assert any("(Algorithm-2 test loss)" in r for r in rows[rows.index(sub) :])
    sel = runs[runs["selected"] & (runs["method"] == "shrinking_gradient")]
    for D, cell in zip((20, 40), sub.split("|")[3:5], strict=True):
        want = sel.loc[sel["D"] == D, "test_loss_const_subset"].mean()
        assert float(cell.split("±")[0]) == pytest.approx(want, rel=1e-3)
    # the predictors table has the subset's mean predictor beside the Algorithm-2 loss
    head = next(x for x in text.splitlines() if "final, Algorithm-2 estimates" in x)
    cols = [c.strip() for c in head.strip("|").split("|")]
    i = cols.index("final, Algorithm-2 estimates")
    assert cols[i + 1] == "mean predictor on the Algorithm-2 test points"


# ----------------------------------------------------------------------------------------------
# the setting of a learner without parameters; the theory preset's grid


def test_a_learner_without_parameters_reports_its_setting():
    from ilnrun.report.sections import selected

    r = object.__new__(ReportData)
    r.cfg = {"methods": {"kernel_ogd": {}}}
    r.methods, r.compared, r.ks = ["kernel_ogd"], [], []
    # the empty setting reads back from summary.csv as NaN; a second group selected nothing
    r.summary = pd.DataFrame(
        {"method": ["kernel_ogd"] * 2, "dsgd_k": [np.nan] * 2, "n": [3, 0], "setting": [np.nan] * 2}
    )
    text = "\n".join(selected.render(r))
    assert "(no parameters) (×1)" in text
    assert "none (all diverged)" not in text


def test_the_theory_preset_grid_prints_its_step_size_not_the_unused_eta():
    from ilnrun.report.sections.setup import applies, grid_lines

    params = {
        "eta": 0.1,
        "schedule": "constant",
        "decay": 1.0,
        "B": 1.0,
        "sampler": "iid",
        "preset": "theory",
        "c": [0.1, 1.0],
    }
    lines = grid_lines("shrinking_gradient", params, [100, 400])
    assert "eta = 0.1" not in lines[0]
    assert "(eta, schedule, decay: not used by any setting)" in lines[0]
    assert len(lines) == 3 and all("eta = B/√T" in x for x in lines[1:])
    assert "T=100: eta=0.1, m=" in lines[1] and "T=400: eta=0.05, m=" in lines[1]
    budget = grid_lines("shrinking_gradient", {**params, "preset": "budget", "c": 1.0}, [100])
    assert budget == [
        "  - Shrinking Gradient: eta = 0.1, schedule = constant, B = 1.0, sampler = iid, "
        "preset = budget (decay, c: not used by any setting)"
    ]
    scaling = "Labels are brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed ..."
    assert applies(scaling, {"rkhs_norm": None}) and not applies(scaling, {"rkhs_norm": 1.0})
    assert applies("Inputs ...", {"rkhs_norm": 1.0})


def test_theorem1_counts_its_data_instances():
    """The config says how many data instances its label bound was measured on: one per T and
    repetition."""
    from ilnrun import config as C

    cfg = C.load(Path(__file__).resolve().parents[1] / "configs" / "theorem1.yaml")
    n = len(cfg["dataset"]["T"]) * cfg["repetitions"]
    counts = re.findall(r"(\d+) data instances", " ".join(cfg["description"].split()))
    assert all(int(c) == n for c in counts), (counts, n)
