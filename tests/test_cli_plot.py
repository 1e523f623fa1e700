"""``ilnrun plot``: figures from a tiny results directory produced through the CLI."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import invoke

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
    _check(paths, {"figure1.png", "curves.png", "budget_sweep.png"})
    assert all(p.parent == out for p in paths)


def test_single_budget_has_no_sweep_and_is_deterministic(one_budget: Path) -> None:
    paths = plot_results(one_budget, ["png", "pdf", "svg"])
    _check(paths, {f"{n}.{f}" for n in ("figure1", "curves") for f in ("png", "pdf", "svg")})
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


def test_test_loss_figures_draw_the_mean_predictor_and_the_algorithm2_loss(finished_run):
    """figure1 and budget_sweep carry the mean-predictor line and Shrinking Gradient's
    Algorithm-2 test loss with its m_test, labelled in the legend."""
    from ilnrun import plots

    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    data = plots._Data.load(Path(out))
    fig = plots._figure1(data)
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert plots.MEAN_STYLE["label"] in labels
    assert any("Algorithm-2 test estimates (m_test=50)" in x for x in labels)
