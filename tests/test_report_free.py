"""The report without the kernel (issue #25): the verdict table without the kernel beside the
one with it, the cost–NMSE frontier, the m_test section, and every verdict line of the index
saying which protocol it is — on a tiny experiment actually run.

The cost columns of docs/protocol.md §10 (``eval_kernel``, ``evals_total``,
``kernel_evals_total``, ``test_evals_free``, ``test_loss_subset``, ``test_nmse_estimated_m<m>``)
are written by ``ilnrun run`` itself where this tree has them. Where it does not yet, the
fixture adds **stand-ins** computed from the run's own columns (:func:`stand_in`, marked as
such); every test reads the columns through the report, so it runs unchanged once they are
real.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, legends_inside, tiny_config, write_config
from scipy import stats as st

from ilnrun.learners import LEARNERS
from ilnrun.report.data import FREE, KERNEL, ReportData

N_EST = 30  # of the 60 test points: the Algorithm-2 loss is on a subset
M_TEST = 5  # few samples: the Algorithm-2 selection differs from the exact one somewhere
SWEEP = [20, 200]


def _has_key(name: str) -> bool:
    """Whether this tree's config takes ``evaluation.<name>``."""
    from ilnrun.config import keys

    names = {p.name for p in keys.EVALUATION_PARAMS}
    return name in names.union(getattr(keys, "NEW_EVALUATION_KEYS", ()))


def stand_in(runs: pd.DataFrame) -> pd.DataFrame:
    """STAND-IN for the cost columns a run of this tree does not write yet (each added only
    where absent): values derived from the row's own columns, plausible but not measured —
    the test-time cost of exact evaluation as closed-form kernel values, the feature learners'
    loss on all test points as their ``test_loss_subset``, the Algorithm-2 NMSE scaled as a
    sweep. Nothing here is a number the project reports."""
    runs = runs.copy()
    kernel = runs["method"].map(lambda m: LEARNERS[m].kernel_blocks)  # evaluated with k
    n = runs["n_val"] + runs["n_test"]
    per_point = runs["test_evals"].astype(float)
    add = {
        "eval_kernel": "exact",
        "test_loss_subset": runs["test_loss"],
        "evals_total": runs["train_evals"] + np.where(kernel, 0, n * per_point),
        "kernel_evals_total": runs["kernel_evals"].fillna(0) + np.where(kernel, n * per_point, 0),
        "test_evals_free": np.where(
            runs["method"] == "shrinking_gradient",
            2 * M_TEST,
            np.where(runs["method"] == "kernel_ogd", np.nan, per_point),
        ),
    }
    for m in SWEEP:
        add[f"test_nmse_estimated_m{m}"] = runs["test_nmse_estimated"] * (M_TEST / m) ** 0.5
    for col, values in add.items():
        if col not in runs:
            runs[col] = values
    return runs


@pytest.fixture(scope="module")
def runs_dirs(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny experiment (two budgets, four step sizes of Shrinking Gradient, the Algorithm-2
    loss with 5 samples on 30 of 60 test points) run once: ``(as written, with the cost
    columns)`` — the second the same results with :func:`stand_in` applied (nothing added
    once the run writes the columns)."""
    base = tmp_path_factory.mktemp("free")
    cfg = tiny_config(
        **{
            "budget.dsgd_k": [2, 4],
            "evaluation.n_test_estimated": N_EST,
            "evaluation.m_test": M_TEST,
            "methods.shrinking_gradient.eta": [0.1, 0.3, 1.0, 3.0],
        }
    )
    if _has_key("m_test_sweep"):
        cfg["evaluation"]["m_test_sweep"] = SWEEP
    out = base / "written"
    res = invoke(["run", write_config(base / "t.yaml", cfg), "--out", out, "-q"])
    assert res.exit_code == 0, res.output
    full = base / "full"
    shutil.copytree(out, full)
    runs = pd.read_csv(full / "runs.csv")
    sg = runs[runs["method"] == "shrinking_gradient"]
    assert (sg["selected"] != sg["selected_estimated"]).any()  # the two selections differ
    stand_in(runs).to_csv(full / "runs.csv", index=False)
    return out, full


def _bare(runs_dirs, tmp_path) -> Path:
    """The results without any of the new columns (what every committed experiment holds)."""
    out = tmp_path / "bare"
    shutil.copytree(runs_dirs[0], out)
    runs = pd.read_csv(out / "runs.csv")
    new = ["eval_kernel", "evals_total", "kernel_evals_total", "test_evals_free"]
    new += ["test_loss_subset", "m_test", "val_evals", "test_evals_psi", "diagnostic_evals"]
    new += ["val_kernel_evals", "test_kernel_evals"]
    new += [c for c in runs if c.startswith("test_nmse_estimated_m")]
    runs.drop(columns=[c for c in new if c in runs]).to_csv(out / "runs.csv", index=False)
    return out


def _hand_paired(runs: pd.DataFrame, keys: dict, other: str, other_metric: str) -> dict:
    """By hand: Shrinking Gradient's setting with the lowest mean ``val_loss_estimated`` over
    repetitions (none failed), the log of its ``test_loss_estimated`` over ``other``'s
    validation-selected ``other_metric``, per repetition; the geometric-mean ratio, its 95%
    Student-t interval and the paired t-test's p-value."""
    g = runs
    for k, v in keys.items():
        g = g[g[k] == v]
    sg = g[g["method"] == "shrinking_gradient"]
    ok = sg.groupby("setting").filter(lambda h: not (h["diverged"] | h["timed_out"]).any())
    best = ok.groupby("setting")["val_loss_estimated"].mean().idxmin()
    a = ok[ok["setting"] == best].set_index("repetition")["test_loss_estimated"]
    o = g[(g["method"] == other) & g["selected"]].set_index("repetition")[other_metric]
    d = np.log((a / o).dropna().to_numpy(float))
    half = st.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return {
        "ratio": math.exp(d.mean()),
        "lo": math.exp(d.mean() - half),
        "hi": math.exp(d.mean() + half),
        "p": st.ttest_1samp(d, 0.0).pvalue,
        "n": len(d),
    }


@pytest.mark.parametrize("columns", ["with the new columns", "without them"])
def test_the_table_without_the_kernel_recomputes_by_hand(runs_dirs, tmp_path, columns):
    """Each cell of the test-loss verdict without the kernel is the paired loss ratio of a
    hand computation: SG selected on ``val_loss_estimated`` and scored on
    ``test_loss_estimated`` against each kernel-free competitor's selected ``test_loss_subset``
    (old results: its ``test_loss`` on all test points, said in the report)."""
    d = runs_dirs[1] if columns == "with the new columns" else _bare(runs_dirs, tmp_path)
    r = ReportData(d, tmp_path / "rep")
    runs = r.runs
    metric = "test_loss_subset" if "test_loss_subset" in runs else "test_loss"
    assert r.free_points_differ == (metric == "test_loss")
    rows = r.verdict_rows("test_loss", None, FREE)
    assert {o for _, o, *_ in rows} == {"doubly_sgd", "fixed_random"}
    for subject, other, k, ps, _ in rows:
        assert subject == "shrinking_gradient"
        for x, p in zip(r.xs, ps, strict=True):
            hand = _hand_paired(runs, r.keys(k, x), other, metric)
            assert p["n"] == hand["n"] == 2
            assert np.isclose(p["ratio"], hand["ratio"], rtol=1e-12)
            assert np.isclose(p["lo"], hand["lo"], rtol=1e-9)
            assert np.isclose(p["hi"], hand["hi"], rtol=1e-9)
            assert np.isclose(p["p"], hand["p"], rtol=1e-9)


def test_no_learner_that_needs_the_kernel_is_without_the_kernel(runs_dirs, tmp_path):
    """Kernel OGD (needs_kernel) is in the run, and nowhere in the view, the verdicts or the
    table without the kernel."""
    r = ReportData(runs_dirs[1], tmp_path / "rep")
    assert "kernel_ogd" in set(r.runs["method"])
    view = r.view(FREE)
    assert not any(LEARNERS[m].needs_kernel for m in set(view["method"]))
    assert not any(LEARNERS[m].needs_kernel for m in r.compared_in(FREE))
    for metric, by in (("test_loss", None), ("online_loss", None), ("online_loss", "online_loss")):
        for _, other, *_ in r.verdict_rows(metric, by, FREE):
            assert not LEARNERS[other].needs_kernel
    assert not any(LEARNERS[m].needs_kernel for m, *_ in r.mean_rows("test_loss", FREE))
    assert invoke(["report", runs_dirs[1], "--out", tmp_path / "rep"]).exit_code == 0
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    free = text.split("### Verdict table without the kernel")[1].split("**Test loss against")[0]
    assert "Kernel OGD" not in free and "| SG < Doubly SGD |" in free


def test_a_kernel_free_run_says_the_table_with_the_kernel_was_not_run(runs_dirs, tmp_path):
    """Rows of ``evaluation.kernel: free``: no table with the kernel (a sentence says why); the
    table without it reads every learner's own ``val_loss`` / ``test_loss``."""
    out = tmp_path / "free"
    shutil.copytree(runs_dirs[1], out)
    runs = pd.read_csv(out / "runs.csv")
    runs["eval_kernel"] = "free"  # the wording only: these rows are an exact run's
    runs.to_csv(out / "runs.csv", index=False)
    r = ReportData(out, tmp_path / "rep")
    assert r.view(KERNEL) is None and r.verdict_rows("test_loss", None, KERNEL) == []
    assert r.view(FREE)["test_loss"].equals(runs.loc[runs["method"] != "kernel_ogd", "test_loss"])
    assert invoke(["report", out, "--out", tmp_path / "rep"]).exit_code == 0
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "Not run: this run's protocol is `evaluation.kernel: free`" in text
    headline = text.split("## Headline")[1].split("\n## ")[0]
    assert "selected and evaluated with the closed-form kernel" not in headline
    assert "(test loss without the kernel, counted over the 2 D; every learner" in headline


def _frontier_legends_inside(d: Path, monkeypatch) -> dict[str, int]:
    """``plot_results`` on ``d``, checking that every legend of every figure saved lies inside
    the figure's own box; the legends counted per figure."""
    from ilnrun import plots

    checked: dict[str, int] = {}
    save = plots.save_figure_atomic

    def save_and_check(fig, path, **kw) -> None:
        save(fig, path, **kw)
        checked[path.stem] = legends_inside(fig, path.name)

    monkeypatch.setattr(plots, "save_figure_atomic", save_and_check)
    plots.plot_results(d, ["png"])
    return checked


def test_frontier_is_drawn_with_its_legend_inside_and_read_in_the_report(
    runs_dirs, tmp_path, monkeypatch
):
    from ilnrun.plots import _Data, frontier_points

    d = tmp_path / "full"
    shutil.copytree(runs_dirs[1], d)
    checked = _frontier_legends_inside(d, monkeypatch)
    assert checked["frontier"] == 1 and checked["m_test"] == 1
    assert (d / "frontier.png").is_file() and (d / "m_test.png").is_file()
    runs = pd.read_csv(d / "runs.csv")
    points = pd.DataFrame(frontier_points(_Data.load(d), runs))
    # one curve per learner across the two budgets; SG twice: with and without the kernel
    sg = points[points["method"] == "shrinking_gradient"]
    assert sorted(sg["free_point"].value_counts().to_dict().items()) == [(False, 4), (True, 4)]
    assert sg.loc[~sg["free_point"], "kernel"].all()
    assert not sg.loc[sg["free_point"], "kernel"].any()
    dsgd = points[(points["method"] == "doubly_sgd") & (points["panel"] == 0)].sort_values("k")
    sel = runs[(runs["method"] == "doubly_sgd") & runs["selected"] & (runs["D"] == 20)]
    cost = (sel["evals_total"] + sel["kernel_evals_total"]).groupby(sel["dsgd_k"]).mean()
    assert np.allclose(dsgd["x"], cost.to_numpy()) and not dsgd["kernel"].any()
    res = invoke(["report", d, "--out", tmp_path / "rep"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "![frontier.png](frontier.png)" in text and "How to read `frontier.png`" in text
    assert "## Algorithm-2 test NMSE against m_test" in text and "![m_test.png]" in text
    assert (tmp_path / "rep" / "frontier.png").is_file()


def test_results_without_the_new_columns_report_as_before_with_notes(runs_dirs, tmp_path):
    """Every committed experiment's results lack the cost columns: ``plot`` draws no frontier
    and says why, the report says why, and everything else is there."""
    d = _bare(runs_dirs, tmp_path)
    res = invoke(["plot", d, "--format", "png"])
    assert res.exit_code == 0, res.output
    assert "note: frontier not drawn: runs.csv has no evals_total" in res.output
    assert not (d / "frontier.png").exists() and not (d / "m_test.png").exists()
    res = invoke(["report", d, "--out", tmp_path / "rep"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "_The cost–NMSE frontier not drawn: runs.csv has no evals_total" in text
    assert "## Algorithm-2 test NMSE against m_test" not in text
    assert "### Verdict table with the closed-form kernel" in text
    assert "**on all test points, while Shrinking Gradient's Algorithm-2 loss is on the" in text


VERDICT_FREE = (
    "Lemma 5's bound",  # reports written before it read "Implementation check"
    "Implementation check",
    "Selected at the edge of its grid",
    "One repetition",
    "Shrinking Gradient against the best competitor: none",
    "The learners learn with different losses",  # a note on units (classification), no claim
)


def _verdict_lines(readme: str) -> list[str]:
    """The bullet lines of an index that state a verdict (not a bound check or grid note)."""
    skip = tuple(f"- {v}" for v in VERDICT_FREE)
    return [x for x in readme.splitlines() if x.startswith("- ") and not x.startswith(skip)]


def test_every_index_line_says_with_or_without_the_kernel(runs_dirs, tmp_path):
    """A new report's headline and an old committed one (no protocol line: read as selected and
    evaluated with the closed-form kernel) side by side in one index: every verdict line names
    its protocol, and the old one's claim lines say "with the closed-form kernel"."""
    experiments = tmp_path / "experiments"
    assert invoke(["report", runs_dirs[1], "--out", experiments / "new"]).exit_code == 0
    # budget_sweep's report as committed before reports named their protocol
    old = Path(__file__).parent / "data" / "legacy_budget_sweep_REPORT.md"
    (experiments / "old").mkdir()
    shutil.copy(old, experiments / "old" / "REPORT.md")
    assert invoke(["index", experiments]).exit_code == 0
    text = (experiments / "README.md").read_text()
    lines = _verdict_lines(text)
    assert len(lines) > 10
    for line in lines:
        assert "with the closed-form kernel" in line or "without the kernel" in line, line
    old_part = text.split("(old/REPORT.md)")[1]
    assert (
        "- Shrinking Gradient, selected and evaluated with the closed-form kernel, reaches a "
        "lower test loss than Doubly SGD: **holds** at k = 1, 2, 4, 8, 16, 32, 64."
    ) in old_part
    assert (
        "and without the kernel at test time (Algorithm-2 test estimates, settings selected "
        "with the closed-form kernel) worse than predicting the mean (NMSE 2.9)"
    ) in old_part
    assert (experiments / "old" / "REPORT.md").read_bytes() == old.read_bytes()  # never edited


def test_the_committed_index_is_what_index_writes_and_names_every_protocol(tmp_path):
    """experiments/README.md is regenerated from the committed reports (never by hand), and
    each of its verdict lines says with or without the kernel."""
    repo = Path(__file__).parents[1] / "experiments"
    copy = tmp_path / "experiments"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns("*.png", "*.pdf", "*.svg"))
    assert invoke(["index", copy]).exit_code == 0
    text = (copy / "README.md").read_text()
    assert text == (repo / "README.md").read_text()
    for line in _verdict_lines(text):
        assert "with the closed-form kernel" in line or "without the kernel" in line, line
