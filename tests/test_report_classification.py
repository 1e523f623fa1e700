"""The report and figures of a classification run (±1 labels; docs/protocol.md §7.4, §8, §8.3):
the majority-class yardstick, the test error rate with intervals, the test-error verdict (paired
differences of error rates in the report's Holm family) and the test-error figures — on a tiny
digits 8-vs-6 run with Shrinking Gradient (square loss on ±1 labels), Doubly SGD (hinge) and
Nyström + LinearSVC, packed and reported as a committed experiment, every verdict rechecked by
the independent code of ``test_committed_reports``."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, write_config
from scipy import stats
from test_committed_reports import (
    ERROR_TABLE,
    MIN_REPETITIONS,
    packed_repo,
    recheck,
    runs_of,
    verdict_tables,
)

from ilnrun.cell import reference_losses
from ilnrun.datasets.base import Dataset
from ilnrun.losses import LOSSES, majority_class
from ilnrun.plots import _Data

CONFIG = {
    "name": "clf",
    "seed": 5,
    "repetitions": MIN_REPETITIONS,
    "dataset": {"kind": "digits", "classes": [8, 6], "T": 100, "n_val": 50, "n_test": 80},
    "feature_map": {"kind": "fourier", "sigma": 4.0},
    "budget": {"match": "evaluations", "dsgd_k": 4},
    "evaluation": {"m_test": 30, "curve_points": 5},
    "methods": {
        "shrinking_gradient": {"eta": [0.3, 1.0], "schedule": "constant", "B": 1.0},
        "doubly_sgd": {"eta": [0.3, 1.0], "loss": "hinge"},
        "nystroem_svm": {"rank": 30, "C": [0.1, 10.0], "loss": "hinge"},
    },
}


def run(tmp: Path, cfg: dict) -> Path:
    """``ilnrun run`` of ``cfg`` into ``tmp/results`` (exit 0); the results folder."""
    path = write_config(tmp / "clf.yaml", cfg)
    res = invoke(["run", path, "--out", tmp / "results", "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    return tmp / "results"


@pytest.fixture(scope="module")
def clf_repo(tmp_path_factory) -> Path:
    """The tiny classification run packed and reported (figures drawn) as
    ``experiments/tiny/`` of a repository layout."""
    out = run(tmp_path_factory.mktemp("clf"), CONFIG)
    return packed_repo(out, tmp_path_factory.mktemp("repo"))


def report_of(repo: Path) -> tuple[str, Path]:
    folder = repo / "experiments" / "tiny" / "results"
    return (folder.parent / "REPORT.md").read_text(), folder


def section(text: str, title: str) -> str:
    """The Markdown section of ``text`` whose heading starts with ``title``."""
    start = next(i for i, x in enumerate(text.split("\n")) if x.startswith(title))
    lines = text.split("\n")[start + 1 :]
    end = next((i for i, x in enumerate(lines) if x.startswith("## ")), len(lines))
    return "\n".join(lines[:end])


def test_majority_class_is_the_yardstick_of_every_loss():
    """``test_error_const`` is the majority class of the training labels, ``+1`` on a tie,
    whatever the loss: the square loss's best constant (the mean, 0 on a tie) and the logistic
    log-odds (0 on a tie) have no sign there and would count every test point an error."""
    assert majority_class(np.array([1.0, -1.0, 1.0, -1.0])) == 1.0
    assert majority_class(np.array([1.0, -1.0, -1.0])) == -1.0
    y_test = np.array([1.0, 1.0, 1.0, -1.0])
    tie = Dataset(
        X_train=np.zeros((4, 2)),
        y_train=np.array([1.0, -1.0, 1.0, -1.0]),
        X_val=np.zeros((1, 2)),
        y_val=np.array([1.0]),
        X_test=np.zeros((4, 2)),
        y_test=y_test,
    )
    for name in ("square", "logistic", "hinge", "squared_hinge", "smoothed_hinge"):
        ref = reference_losses(tie, None, LOSSES[name], error=True)
        assert ref["test_error_const"] == 0.25, name  # +1 everywhere: one error in four


def test_the_report_has_test_error_tables_with_intervals_and_the_majority_class(clf_repo):
    text, folder = report_of(clf_repo)
    runs = runs_of(folder)
    title = next(x for x in text.split("\n") if x.startswith("## Test error rate"))
    assert "mean ± 95% CI over repetitions" in title
    table = section(text, "## Test error rate")
    assert "*majority class*" in table and "own validation loss" in table
    header = next(x for x in table.split("\n") if x.startswith("| k |"))
    assert header.endswith("| majority class |")
    row = next(x for x in table.split("\n") if x.startswith("| 4 |"))
    cells = [c.strip() for c in row.strip()[1:-1].split(" | ")]
    assert all(" ± " in c for c in cells[1:]), row  # every learner and the yardstick
    # the yardstick's cell is the majority class's mean error over the repetitions, one
    # value per repetition whatever the learner's loss
    per_rep = runs.groupby("repetition")["test_error_const"].nunique()
    assert (per_rep == 1).all()
    const = runs.groupby("repetition")["test_error_const"].first().mean()
    assert math.isclose(float(cells[-1].split(" ± ")[0]), const, rel_tol=1e-3)
    # the test loss is each learner's own loss, the log-loss named
    assert "**log-loss**" in section(text, "## Test loss")
    assert "Doubly SGD: hinge" in section(text, "## Test loss")


def test_the_test_error_verdict_agrees_with_the_runs(clf_repo):
    text, folder = report_of(clf_repo)
    runs = runs_of(folder)
    tables = [(t, h, r) for t, h, r in verdict_tables(text) if t.startswith(ERROR_TABLE)]
    assert [t for t, _, _ in tables] == [f"{ERROR_TABLE}, with the closed-form kernel"]
    _, header, rows = tables[0]
    assert header == [
        "claim",
        "k",
        "all",
        "Holm-adjusted p",
        "verdict",
        "against the majority class",
    ]
    assert [r[0] for r in rows] == ["SG < Doubly SGD"]  # a batch reference is no competitor
    assert re.fullmatch(r"[+-]\S+ \[[+-]\S+, [+-]\S+\]", rows[0][2]), rows[0]
    assert not rows[0][4].startswith("—")  # five repetitions: a word
    assert "this test-error verdict is the comparison that is comparable" in text
    headline = section(text, "## Headline")
    assert (
        "Shrinking Gradient, selected and evaluated with the closed-form kernel, reaches a lower "
        "test error rate than Doubly SGD" in headline
    )
    checked, problems = recheck(text, runs)
    assert problems == []
    # with the kernel 2 loss comparisons, without it 3, and the test error: 1 competitor, one
    # budget; against the mean 3 learners + SG's Algorithm-2 row
    assert checked == (2 + 3 + 1) + 4
    assert "verdict tables make **6 comparisons**" in text


def _difference(a: pd.Series, b: pd.Series) -> str:
    """``a − b`` paired by repetition as the report writes it (``+0.05 [+0.01, +0.09]``),
    computed here with scipy's t quantile."""
    d = (a - b).dropna().to_numpy(dtype=float)
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return f"{d.mean():+.3g} [{d.mean() - half:+.3g}, {d.mean() + half:+.3g}]"


def test_the_gap_to_the_batch_fit_is_in_test_error(clf_repo):
    """With ±1 labels the gap to the batch fit is each learner's test error rate minus the batch
    reference's, paired by repetition: a hinge learner and a hinge reference have no NMSE, so
    the NMSE gap said "no data" for every learner. The headline states it against the best
    batch reference (here the only one), the table against each."""
    text, folder = report_of(clf_repo)
    runs = runs_of(folder)
    sel = runs[runs["selected"].astype(bool)]

    def errors(method: str) -> pd.Series:
        return sel[sel["method"] == method].set_index("repetition")["test_error"]

    ref = errors("nystroem_svm")
    headline = section(text, "## Headline")
    (line,) = [x for x in headline.split("\n") if x.startswith("- Gap to the batch fit")]
    assert line.startswith(
        "- Gap to the batch fit at k = 4, with the closed-form kernel, in test error rate (the "
        f"batch reference: Nyström + LinearSVC (batch), test error rate {ref.mean():.4g} ± "
    )
    assert "no data" not in line and "NMSE" not in line
    title = "**Gap to the batch fit: test error rate minus Nyström + LinearSVC (batch)'s**"
    table = text.split(title)[1].split("\n\n**")[0]
    for method, name, short in (
        ("shrinking_gradient", "Shrinking Gradient", "SG"),
        ("doubly_sgd", "Doubly SGD", "DSGD"),
    ):
        want = _difference(errors(method), ref)
        assert f"{short} {want}" in line
        assert f"| {name} − NSVM | 4 | {want} |" in table


def test_each_loss_has_its_own_yardsticks(clf_repo):
    """Shrinking Gradient learns the square loss, Doubly SGD and the reference the hinge: the
    test-loss table is given per loss, each with that loss's best constant and zero predictor
    (the hinge's zero predictor is 1, the square loss's ½ mean y² = ½), and the table against
    the mean predictor puts each loss's yardstick row above its learners."""
    text, folder = report_of(clf_repo)
    runs = runs_of(folder)
    table = section(text, "## Test loss")
    assert "The table is given per loss" in table
    groups = (
        ("square", "½(p−y)²", ["Shrinking Gradient"]),
        ("hinge", "max(0,1−yp)", ["Doubly SGD", "Nyström + LinearSVC (batch)"]),
    )
    for loss, formula, names in groups:
        caption = f"Loss `{loss}`, {formula}: {', '.join(names)}."
        block = table.split(caption)[1].split("\n\n", 2)[1]
        head, _, row = block.strip().split("\n")
        assert head == "| k | " + " | ".join(names) + " | mean predictor | zero predictor |"
        cells = [c.strip() for c in row.strip()[1:-1].split(" | ")]
        of_loss = runs[runs["loss"] == loss].groupby("repetition")
        for shown, column in zip(cells[-2:], ("test_loss_const", "test_loss_zero"), strict=True):
            assert (of_loss[column].nunique() == 1).all()  # data-only: one value a repetition
            want = of_loss[column].first().mean()
            assert math.isclose(float(shown.split(" ± ")[0]), want, rel_tol=1e-3), (loss, column)
    against = text.split("**Test loss against the mean predictor**")[1].split("\n\n")[1]
    rows = [r.split(" | ")[0].lstrip("| ") for r in against.split("\n")[2:]]
    hinge = rows.index("mean predictor's test loss on all test points, hinge loss (the yardstick)")
    assert rows[0] == "mean predictor's test loss on all test points, square loss (the yardstick)"
    assert rows[hinge + 1] == "Doubly SGD < mean predictor"
    assert rows[1] == "Shrinking Gradient < mean predictor"


def test_the_recheck_finds_a_changed_test_error_cell_word_and_majority(clf_repo):
    text, folder = report_of(clf_repo)
    runs = runs_of(folder)
    row = next(x for x in text.split("\n") if re.match(r"\| SG < Doubly SGD \| 4 \| [+-]", x))
    cells = [c.strip() for c in row.strip()[1:-1].split(" | ")]
    other_word = "holds" if cells[4] != "holds" else "does not hold"
    majority = "SG: worse than the majority class; DSGD: worse than the majority class"
    assert cells[5] != majority
    edits = [
        (cells[2], "+0.5 [+0.4, +0.6]", "not"),
        (f" | {cells[4]} |", f" | {other_word} |", "says"),
        (f" | {cells[5]} |", f" | {majority} |", "against the majority class"),
    ]
    for old, new, says in edits:
        changed = text.replace(row, row.replace(old, new, 1))
        assert changed != text
        problems = recheck(changed, runs)[1]
        assert problems and any(says in p for p in problems), (new, problems)
    # the error rates of the runs moved: the cells are found wrong
    moved = runs.copy()
    sg = moved["method"] == "shrinking_gradient"
    moved.loc[sg, "test_error"] = moved.loc[sg, "test_error"] + 0.3
    assert any(ERROR_TABLE in p for p in recheck(text, moved)[1])


def test_the_figures_are_in_test_error_with_the_majority_class(clf_repo):
    text, folder = report_of(clf_repo)
    report_dir = folder.parent
    for name in ("figure1.png", "frontier.png", "curves.png"):
        assert (report_dir / name).is_file() and f"![{name}]({name})" in text
    figures = section(text, "## Figures")
    assert "**test error rate**" in figures and "majority class" in figures
    data = _Data.load(folder)
    assert data.metric == "test_error" and data.classifies
    assert data.ylabel.startswith("test error rate")


def test_a_kernel_free_run_makes_its_test_error_verdict_without_the_kernel(tmp_path):
    """Under ``evaluation.kernel: free`` the test errors are of kernel-free predictions: the
    test-error table is made without the kernel; 2 repetitions give intervals, no word."""
    cfg = {**CONFIG, "repetitions": 2}
    cfg["evaluation"] = {**CONFIG["evaluation"], "kernel": "free"}
    cfg["methods"] = {k: v for k, v in CONFIG["methods"].items() if k != "nystroem_svm"}
    out = run(tmp_path, cfg)
    res = invoke(["report", out, "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "report" / "REPORT.md").read_text()
    titles = [t for t, _, _ in verdict_tables(text) if t.startswith(ERROR_TABLE)]
    assert titles == [f"{ERROR_TABLE}, without the kernel"]
    checked, problems = recheck(text, runs_of(out))
    assert problems == [] and checked > 0
    assert "— (2 repetitions: a verdict needs 5)" in text


def test_a_regression_report_has_no_test_error_section(finished_run, tmp_path):
    """Real labels: no test-error table, verdict, figure text or log-loss sentence (the
    committed reports, all regression, stay byte-identical: test_committed_reports)."""
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    shutil.copytree(out, tmp_path / "results")
    res = invoke(["report", tmp_path / "results", "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "report" / "REPORT.md").read_text()
    for absent in ("majority class", "test error rate", "log-loss", ERROR_TABLE):
        assert absent not in text
    runs = pd.read_csv(tmp_path / "results" / "runs.csv")
    assert "test_error" not in runs or runs["test_error"].isna().all()


def test_the_best_competitor_is_chosen_by_test_error(clf_repo):
    """In a classification run the headline's best competitor is the one with the lowest mean
    test error rate (a hinge learner has no NMSE, so choosing by NMSE never found Doubly SGD
    here), and the line gives the paired difference of error rates, recomputed from runs.csv."""
    text, folder = report_of(clf_repo)
    runs = runs_of(folder)
    sel = runs[runs["selected"].astype(bool)]

    def errors(method: str) -> pd.Series:
        return sel[sel["method"] == method].set_index("repetition")["test_error"]

    (line,) = [
        x for x in section(text, "## Headline").split("\n") if "against the best competitor" in x
    ]
    assert "Doubly SGD (the lowest mean test error rate" in line
    assert "NMSE" not in line
    sg, dsgd = errors("shrinking_gradient"), errors("doubly_sgd")
    assert _difference(sg, dsgd) in line
    assert f"(error rate {sg.mean():.3g} against {dsgd.mean():.3g})" in line
