"""``ilnrun report``: REPORT.md generated from a results directory, end to end."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
from conftest import invoke, tiny_config, write_config

from ilnrun.learners import LEARNERS


def _plotted_copy(finished_run, tmp_path):
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    copy = tmp_path / "results"
    shutil.copytree(out, copy)
    assert invoke(["plot", copy, "--format", "png"]).exit_code == 0
    return copy


def test_report_has_every_section_and_learner(finished_run, tmp_path):
    results = _plotted_copy(finished_run, tmp_path)
    out = tmp_path / "report"
    res = invoke(["report", results, "--out", out])
    assert res.exit_code == 0, res.output
    text = (out / "REPORT.md").read_text()
    for heading in (
        "## Headline",
        "## Setup",
        "## Choices where the paper is silent",
        "## Budgets as counted by the learners",
        "## Figures",
        "## Test loss",
        "## Online loss",
        "## Selected hyperparameters",
        "## Verdict on the paper's claim",
    ):
        assert heading in text, heading
    for name in tiny_config()["methods"]:  # every learner the config runs
        assert LEARNERS[name].label in text
    assert (out / "figure1.png").is_file()  # figures copied next to the report
    # a verdict row per competitor and budget, with a verdict word
    # test and online comparisons with the kernel; the same without it, and best-online once
    assert text.count("| SG < Doubly SGD | 4 |") == 5
    # two repetitions: the ratios and intervals, no verdict word (docs/protocol.md §7)
    assert "(2 repetitions: a verdict needs 5)" in text
    assert "**no verdict (fewer than 5 repetitions)**, loss ratio" in text
    # the counted budgets equal the run's own counters
    runs = pd.read_csv(results / "runs.csv")
    target = int(runs["budget_target"].dropna().iloc[0])
    assert f"| {target:,} |" in text
    # the command that regenerates it uses the workers the run used (--jobs 1 here)
    assert "--jobs 1\nilnrun plot" in text


def test_report_refuses_a_directory_without_results(tmp_path):
    res = invoke(["report", tmp_path])
    assert res.exit_code == 2 and "run `ilnrun run`" in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "command, name",
    [
        ("report", "runs.csv"),
        ("report", "summary.csv"),
        ("report", "meta.json"),
        ("report", "config.yaml"),
        ("plot", "curves.csv"),
        ("plot", "summary.csv"),
    ],
)
def test_a_file_linked_out_of_the_directory_is_refused(finished_run, tmp_path, command, name):
    """``report`` and ``plot`` read only what the results directory holds, as ``load()`` does:
    a table linked to another run's file outside it would be reported as this run's."""
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    copy = tmp_path / "results"
    shutil.copytree(out, copy)
    shutil.move(copy / name, tmp_path / name)
    (copy / name).symlink_to(tmp_path / name)
    res = invoke([command, copy, *(["--out", tmp_path / "rep"] if command == "report" else [])])
    assert res.exit_code == 2, res.output
    assert f"{copy / name} is a symbolic link" in res.output and "outside" in res.output
    assert "Traceback" not in res.output
    shutil.move(copy / name, tmp_path / "link")  # a link inside the directory is read
    shutil.move(tmp_path / name, copy / "sub")
    (copy / name).symlink_to("sub")
    assert (
        invoke(
            [command, copy, "--format", "png"] if command == "plot" else [command, copy]
        ).exit_code
        == 0
    )


def test_a_learner_that_diverged_everywhere_has_nothing_to_compare(tmp_path):
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 2})
    cfg["methods"]["doubly_sgd"] = {"eta": [1e6]}
    path = write_config(tmp_path / "div.yaml", cfg)
    out = tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    runs = pd.read_csv(out / "runs.csv")
    assert runs.loc[runs["method"] == "doubly_sgd", "diverged"].all()
    plot = invoke(["plot", out, "--format", "png"])
    assert plot.exit_code == 0, plot.output
    res = invoke(["report", out])
    assert res.exit_code == 0, res.output
    text = (out / "REPORT.md").read_text()
    assert "SG reaches" not in text or "nothing to compare" in text
    assert "Doubly SGD: **nothing to compare**" in text
    assert "none (all diverged)" in text
    assert "Doubly SGD: **no significant difference**" not in text
    # the fourth comparison (against the mean predictor) and the headline say it too
    assert "| Doubly SGD < mean predictor | 4 | — | nothing to compare |" in text
    assert "Doubly SGD: nothing to compare (no selected setting: every setting diverged)" in text
    assert "all settings diverged" in text  # in the tables, not a row of dashes


# what only an interval or a paired test can say: none of it with one repetition
VERDICT_WORDS = (
    "95%",
    "±",
    "†",
    "‡",
    "interval",
    "holds",
    "does not hold",
    "significant",
    "beats the mean predictor",
    "worse than predicting the mean",
    "distinguishable",
    "mixed",
    "nothing to compare",
    "verdict",
)


def test_one_repetition_prints_no_interval_and_no_verdict(tmp_path):
    """A tiny config with ``repetitions: 1`` through ``ilnrun report``: every mean is there,
    no interval, mark or verdict word, and one sentence says why (the old report printed "95%
    interval" with no interval and verdict words as if a test had been made)."""
    from ilnrun.report.data import ONE_REPETITION

    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 1, "budget.dsgd_k": [2, 4]})
    cfg["methods"]["kernel_ridge"] = {}  # the gap to the batch fit too
    path = write_config(tmp_path / "one.yaml", cfg)
    out = tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    assert invoke(["plot", out, "--format", "png"]).exit_code == 0
    res = invoke(["report", out, "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "report" / "REPORT.md").read_text()
    assert ONE_REPETITION == "One repetition: no interval or verdict can be computed."
    assert f"- {ONE_REPETITION}" in text.split("## Setup")[0]  # said in the headline
    said = r"one repetition: no interval( or verdict)? can be computed"
    rest = re.sub(said, "", text, flags=re.IGNORECASE)
    found = [w for w in VERDICT_WORDS if w.lower() in rest.lower()]
    assert not found, found
    assert "## The paper's claim" in text and "| SG < Doubly SGD | 4 |" in text  # differences
    assert "× " in text or "×" in text  # the gap to the batch fit, as one ratio
    assert "test NMSE of the one repetition" in text


def test_two_repetitions_keep_intervals_and_verdicts(finished_run, tmp_path):
    """The same words are there as soon as there are two repetitions (the tiny run has two)."""
    results = _plotted_copy(finished_run, tmp_path)
    assert invoke(["report", results, "--out", tmp_path / "r"]).exit_code == 0
    text = (tmp_path / "r" / "REPORT.md").read_text()
    assert "One repetition" not in text
    assert "95%" in text and "verdict" in text and "±" in text
