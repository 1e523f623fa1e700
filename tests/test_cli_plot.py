"""``ilnrun plot``: figures from a tiny results directory produced through the CLI."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import invoke, legends_inside

from ilnrun.cli import main
from ilnrun.plots import plot_results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

CONFIG = """\
name: plots_test
seed: 3
repetitions: 2
dataset: {{kind: clipped_gaussian, D: [20, 40], T: 30, n_val: 20, n_test: 30, sparsity: 4}}
budget: {{match: evaluations, dsgd_k: {budgets}}}
evaluation: {{m_test: 50}}
methods:
  shrinking_gradient: {{eta: [0.3]}}
  doubly_sgd: {{eta: [0.3]}}
  fixed_random: {{eta: [1.0]}}
  kernel_ogd: {{eta: [1.0]}}
"""


def _run(tmp_path: Path, budgets: list[int]) -> Path:
    """Run the tiny experiment with ``budgets`` through the CLI; return its results directory."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(CONFIG.format(budgets=budgets))
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main, ["run", str(cfg), "--out", str(out), "--jobs", "1", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    for name in ("summary.csv", "curves.csv", "config.yaml"):
        assert (out / name).exists()
    return out


def _check(paths: list[Path], expected: set[str]) -> None:
    assert {p.name for p in paths} == expected
    assert len(paths) == len(expected)
    for p in paths:
        assert p.exists() and p.stat().st_size > 0, p
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == PNG_SIGNATURE
        if p.suffix == ".pdf":
            assert p.read_bytes()[:5] == b"%PDF-"


@pytest.fixture(scope="module")
def one_budget(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("one"), [2])


def test_two_budgets_all_figures(tmp_path: Path) -> None:
    out = _run(tmp_path, [1, 2])
    paths = plot_results(out, ["png"])
    _check(paths, {"figure1.png", "curves.png", "budget_sweep.png", "frontier.png"})
    assert all(p.parent == out for p in paths)


def test_single_budget_has_no_sweep_and_is_deterministic(one_budget: Path) -> None:
    paths = plot_results(one_budget, ["png", "pdf", "svg"])
    kinds = ("figure1", "curves", "frontier")
    _check(paths, {f"{n}.{f}" for n in kinds for f in ("png", "pdf", "svg")})
    assert not list(one_budget.glob("budget_sweep.*"))
    first = {p: p.read_bytes() for p in paths if p.suffix != ".png"}
    again = plot_results(one_budget, ["pdf", "svg"])
    assert {p: p.read_bytes() for p in again} == first


def test_rows_with_nothing_selected_are_skipped(one_budget: Path, tmp_path: Path) -> None:
    for name in ("curves.csv", "config.yaml"):
        (tmp_path / name).write_bytes((one_budget / name).read_bytes())
    summary = pd.read_csv(one_budget / "summary.csv")
    dead = summary["method"] == "doubly_sgd"
    summary.loc[dead, "n"] = 0
    metrics = [c for c in summary.columns if c.endswith(("_mean", "_std", "_ci95"))]
    summary.loc[dead, metrics] = float("nan")
    summary.to_csv(tmp_path / "summary.csv", index=False)
    paths = plot_results(tmp_path, ["svg"])
    _check(paths, {"figure1.svg", "curves.svg"})
    assert "Doubly SGD" not in (tmp_path / "figure1.svg").read_text()


_invoke = invoke


def test_plot_writes_figure1(finished_run):
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    res = _invoke(["plot", out, "--format", "png"])
    assert res.exit_code == 0, res.output
    assert (out / "figure1.png").is_file()
    assert (out / "figure1.png").stat().st_size > 0


def test_test_loss_figures_draw_nmse_one_and_the_algorithm2_loss(finished_run):
    """figure1 plots test NMSE with the labelled NMSE = 1 line (the mean predictor) and Shrinking
    Gradient's Algorithm-2 test NMSE with its m_test and test points, labelled in the legend."""
    from ilnrun import plotkit, plots

    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    data = plots._Data.load(Path(out))
    assert data.metric == "test_nmse"
    fig = plots._figure1(data)
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert plotkit.NMSE_ONE in labels
    assert any("Algorithm-2 test estimates (m_test=50, first 60 test points)" in x for x in labels)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        assert ax.get_ylabel() == plots.TEST_NMSE
        ones = [ln for ln in ax.get_lines() if ln.get_label() == plotkit.NMSE_ONE]
        assert len(ones) == 1 and set(ones[0].get_ydata()) == {1.0}
        # the plotted means are summary.csv's test_nmse_mean (not the scaled loss)
        drawn = {round(float(v), 12) for ln in ax.get_lines() for v in ln.get_ydata()}
    s = data.summary
    assert {round(float(v), 12) for v in s["test_nmse_mean"]} <= drawn | {1.0}
    assert "test NMSE = mean (f(x)−y)² / var(y_test)" in fig.get_suptitle()


def test_old_results_without_nmse_are_drawn_in_test_loss(one_budget: Path, tmp_path: Path):
    """Results written before test_nmse existed: test loss, with the training-mean predictor's
    loss as the yardstick line."""
    from ilnrun import plots

    for name in ("curves.csv", "config.yaml"):
        (tmp_path / name).write_bytes((one_budget / name).read_bytes())
    summary = pd.read_csv(one_budget / "summary.csv")
    summary = summary.drop(columns=[c for c in summary if c.startswith("test_nmse")])
    summary.to_csv(tmp_path / "summary.csv", index=False)
    data = plots._Data.load(tmp_path)
    assert data.metric == "test_loss" and data.ylabel == plots.TEST_LOSS
    fig = plots._figure1(data)
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert plots.MEAN_STYLE["label"] in labels


@pytest.mark.parametrize(
    ("values", "log"),
    [([0.5, 9.9], False), ([0.5, 10.1], True), ([0.05, 1.0], False), ([0.049, 1.0], True)],
)
def test_log_scale_beyond_a_factor_of_20(values, log):
    from ilnrun.plotkit import use_log

    assert use_log(values) is log
    assert use_log([0.0, *values]) is False  # a zero cannot be drawn on a log axis


def test_every_reference_learner_has_its_own_style():
    """No cycle over two: the first 20 reference slots differ in colour or line style, and the
    registered references (kernel OGD, kernel ridge) are told apart by both."""
    from ilnrun.plotkit import reference_style, styles

    slots = [reference_style(j) for j in range(20)]
    assert len({(c, str(ls)) for c, ls, _ in slots}) == 20
    st = styles()
    ogd, krr = st["kernel_ogd"], st["kernel_ridge"]
    assert ogd["color"] != krr["color"] and ogd["linestyle"] != krr["linestyle"]
    assert krr["batch"] and not ogd["batch"]
    compared = {s["color"] for s in st.values() if not s["reference"]}
    assert not compared & {s["color"] for s in st.values() if s["reference"]}


@pytest.fixture(scope="module")
def with_batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny experiment with kernel ridge regression (a batch reference) and two budgets."""
    base = tmp_path_factory.mktemp("batch")
    cfg = base / "tiny.yaml"
    cfg.write_text(CONFIG.format(budgets=[1, 2]) + "  kernel_ridge: {ridge: [0.001]}\n")
    out = base / "results"
    result = invoke(["run", cfg, "--out", out, "--jobs", "1", "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def test_batch_references_are_levels_and_not_learning_curves(with_batch: Path):
    """Kernel ridge is drawn as levels (horizontal segments at its test NMSE, one per D) in
    figure1 and across the panel in budget_sweep, never as a curve, and not in curves."""
    from matplotlib.collections import LineCollection

    from ilnrun import plots

    data = plots._Data.load(with_batch)
    assert data.batch == ["kernel_ridge"] and "kernel_ridge" not in data.references
    label = plots.LEARNERS["kernel_ridge"].label
    krr = data.summary[data.summary["method"] == "kernel_ridge"].sort_values("D")
    fig = plots._figure1(data)
    for ax in fig.axes:
        assert not [ln for ln in ax.get_lines() if ln.get_label() == label]  # no curve
        levels = [c for c in ax.collections if isinstance(c, LineCollection)]
        levels = [c for c in levels if c.get_label() == label]
        assert len(levels) == 2  # one level per D value
        ys = sorted(float(seg[0][1]) for c in levels for seg in c.get_segments())
        assert ys == pytest.approx(sorted(krr["test_nmse_mean"]))
        for c in levels:
            (x0, y0), (x1, y1) = c.get_segments()[0]
            assert y0 == y1 and x0 < x1  # horizontal
    sweep = plots._budget_sweep(data)
    for ax, (_, row) in zip(sweep.axes, krr.iterrows(), strict=True):
        flat = [ln for ln in ax.get_lines() if ln.get_label() == label]
        assert len(flat) == 1 and set(flat[0].get_ydata()) == {row["test_nmse_mean"]}
    curves = plots._curves(data)
    labels = [t.get_text() for legend in curves.legends for t in legend.get_texts()]
    assert label not in labels and plots.LEARNERS["kernel_ogd"].label in labels
    assert "batch, no online pass, not drawn" in curves.get_suptitle()
    paths = plot_results(with_batch, ["png"])
    assert {p.name for p in paths} == {
        "figure1.png",
        "curves.png",
        "budget_sweep.png",
        "frontier.png",
    }


def test_panel_titles_give_the_budget_in_its_unit(with_batch: Path):
    from ilnrun import plots

    data = plots._Data.load(with_batch)
    for fig in (plots._figure1(data), plots._curves(data)):
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        assert all("feature evaluations per pass" in t for t in titles), titles


# Every figure kind ``ilnrun plot`` makes, on tiny results: one dataset setting and one budget
# (single panels, every learner and both batch references, so the legend is at its longest),
# and T varying over two budgets with the regret (several panels, the sweep and the regret).
LEGEND_CASES = {
    "single_panel": (
        {"D": 20, "T": 30},
        [2],
        {"kernel_ridge": {}, "nystroem_ridge": {"rank": 10}},
        None,
        {"figure1", "curves"},
    ),
    "multi_panel": (
        {"D": 20, "T": [30, 40]},
        [1, 2],
        {},
        1.0,
        {"figure1", "curves", "budget_sweep", "regret"},
    ),
}


@pytest.mark.parametrize("case", sorted(LEGEND_CASES))
def test_no_legend_is_clipped(tmp_path: Path, monkeypatch, case: str) -> None:
    """Each legend's window extent (as the renderer lays it out) lies inside its figure's box
    as saved (no ``bbox_inches``: the figure's own box): a single panel's legend of long labels
    side by side was wider than the figure, and the saved image cut off its sides, the line and
    marker samples first."""
    from ilnrun import api, plots

    data, budgets, batch, regret_b, kinds = LEGEND_CASES[case]
    cfg = {
        "name": "legends",
        "seed": 3,
        "repetitions": 2,
        "dataset": {"kind": "clipped_gaussian", "n_val": 20, "n_test": 30, "sparsity": 4, **data},
        "feature_map": {"kind": "coordinate"},
        "budget": {"match": "evaluations", "dsgd_k": budgets},
        "evaluation": {"m_test": 50, "regret_B": regret_b},
        "methods": {
            "shrinking_gradient": {"eta": [0.3]},
            "doubly_sgd": {"eta": [0.3]},
            "fixed_random": {"eta": [1.0]},
            "kernel_ogd": {"eta": [1.0]},
            **batch,
        },
    }
    out = tmp_path / "r"
    api.run_experiment(cfg, out=out)
    checked: dict[str, int] = {}
    save = plots.save_figure_atomic

    def save_and_check(fig, path, **kw) -> None:
        save(fig, path, **kw)
        assert "bbox_inches" not in kw  # the saved image is the figure's box
        checked[path.stem] = legends_inside(fig, path.name)

    monkeypatch.setattr(plots, "save_figure_atomic", save_and_check)
    plots.plot_results(out, ["png"])
    if plots.frontier_missing(pd.read_csv(out / "runs.csv")) is None:
        kinds = kinds | {"frontier"}  # results that count every evaluation
    assert set(checked) == kinds and all(checked.values()), checked


def test_a_run_whose_every_cell_timed_out_is_refused_with_a_reason(tmp_path: Path) -> None:
    """Every cell timed out: curves.csv holds no row (its columns untyped) and summary.csv no
    finished setting. ``plot`` refused it as "column dsgd_k is not numeric" and then, past
    that, with a KeyError; now it says there is nothing to draw and why (exit status 2)."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(CONFIG.format(budgets=[2]) + "limits: {cell_timeout_s: 1.0e-9}\n")
    out = tmp_path / "results"
    assert invoke(["run", cfg, "--out", out, "-q"]).exit_code == 0
    assert pd.read_csv(out / "runs.csv")["timed_out"].all()
    res = invoke(["plot", out, "--format", "png"])
    assert res.exit_code == 2, res.output
    assert "nothing to draw" in res.output and "timed out" in res.output, res.output
    assert "Traceback" not in res.output and not list(out.glob("*.png"))


def test_one_repetition_figures_promise_no_interval(tmp_path: Path, monkeypatch) -> None:
    """With one repetition no interval is drawn, and no label or title says "95% CI" (the
    report says "one repetition" too); with two the labels keep it."""
    from matplotlib.text import Text

    from ilnrun import plots

    texts: dict[str, list[str]] = {}
    save = plots.save_figure_atomic

    def save_and_read(fig, path, **kw) -> None:
        save(fig, path, **kw)
        texts[path.stem] = [t.get_text() for t in fig.findobj(Text)]

    monkeypatch.setattr(plots, "save_figure_atomic", save_and_read)
    for reps in (1, 2):
        cfg = tmp_path / f"r{reps}.yaml"
        cfg.write_text(CONFIG.format(budgets=[2]).replace("repetitions: 2", f"repetitions: {reps}"))
        out = tmp_path / f"out{reps}"
        assert invoke(["run", cfg, "--out", out, "-q"]).exit_code == 0
        texts.clear()
        plot_results(out, ["png"])
        assert set(texts) == {"figure1", "curves", "frontier"}
        shown = " ".join(" ".join(t) for t in texts.values())
        assert ("95%" in shown) == (reps == 2), shown
        assert ("one repetition" in shown) == (reps == 1), shown
        words = " ".join(shown.split())  # (a long title is wrapped)
        assert ("n=1 repetition)" if reps == 1 else "n=2 repetitions)") in words, words
