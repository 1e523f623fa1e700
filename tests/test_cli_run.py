"""``ilnrun run`` end to end through the command line (``click.testing.CliRunner``)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import yaml
from conftest import TINY_CELLS, invoke, tiny_config, write_config

from ilnrun import config as C

OUTPUTS = ("runs.csv", "summary.csv", "curves.csv", "config.yaml", "meta.json")
BUDGETED = ("shrinking_gradient", "doubly_sgd", "fixed_random")


_invoke = invoke


def test_run_writes_all_outputs(finished_run):
    cfg_path, out, result = finished_run
    assert result.exit_code == 0, result.output
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == TINY_CELLS
    assert set(runs["method"]) == {*BUDGETED, "kernel_ogd"}
    assert sorted(runs["D"].unique()) == [20, 40]
    assert sorted(runs["repetition"].unique()) == [0, 1]
    assert runs["diverged"].dtype == bool
    for col in ("online_loss", "val_loss", "test_loss", "test_nmse", "wall_s", "train_evals"):
        assert col in runs.columns
    sg = runs[runs["method"] == "shrinking_gradient"]
    assert sg["test_loss_estimated"].notna().all() and sg["test_loss_avg"].notna().all()
    assert runs["features_sampled"].notna().all() and runs["shrinks"].notna().all()
    # the resolved config is written and equals the resolved input
    assert yaml.safe_load((out / "config.yaml").read_text()) == C.load(cfg_path)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["cells"] == TINY_CELLS and meta["end"] is not None
    assert isinstance(meta["compiled_kernels"], bool)
    summary = pd.read_csv(out / "summary.csv")
    # one row per (method, D): 4 methods x 2 values of D
    assert len(summary) == 8
    curves = pd.read_csv(out / "curves.csv")
    assert {"t", "online_loss", "method", "D", "repetition"} <= set(curves.columns)
    assert curves["t"].max() == 30


def test_budgets_matched_in_every_repetition(finished_run):
    """Every (D, repetition): the three budgeted learners' train_evals within 1% of the target."""
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "runs.csv")
    budgeted = runs[runs["method"].isin(BUDGETED)]
    groups = budgeted.groupby(["D", "repetition"])
    assert groups.ngroups == 4
    for _, g in groups:
        assert set(g["method"]) == set(BUDGETED)
        assert g["budget_target"].nunique() == 1
        target = g["budget_target"].iloc[0]
        assert target == 4 * 30 * 31 // 2
        assert ((g["train_evals"] - target).abs() <= 0.01 * target).all(), g[
            ["method", "train_evals"]
        ]
    oracle = runs[runs["method"] == "kernel_ogd"]
    assert (oracle["train_evals"] == 0).all()


def test_parallel_run_identical_to_serial(finished_run, tmp_path):
    """--jobs 2 gives the same runs.csv as --jobs 1 apart from the wall-clock column."""
    cfg_path, out, result = finished_run
    assert result.exit_code == 0, result.output
    out2 = tmp_path / "parallel"
    res = _invoke(["run", cfg_path, "--out", out2, "--jobs", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    a = pd.read_csv(out / "runs.csv").drop(columns=["wall_s", "eval_s"])
    b = pd.read_csv(out2 / "runs.csv").drop(columns=["wall_s", "eval_s"])
    pd.testing.assert_frame_equal(a, b)


def test_resume_reports_done_and_keeps_outputs(finished_run, tmp_path):
    cfg_path, out, result = finished_run
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = {n: (copy / n).read_bytes() for n in ("runs.csv", "summary.csv", "curves.csv")}
    log_before = (copy / "cells.jsonl").read_bytes()
    res = _invoke(["run", cfg_path, "--out", copy])
    assert res.exit_code == 0, res.output
    assert f"{TINY_CELLS} cells, {TINY_CELLS} already done" in res.output
    assert f"({TINY_CELLS} resumed)" in res.output
    for name, content in before.items():
        assert (copy / name).read_bytes() == content, name
    assert (copy / "cells.jsonl").read_bytes() == log_before


def test_different_config_is_refused_then_fresh_reruns(finished_run, tmp_path):
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    other = write_config(tmp_path / "other.yaml", tiny_config(**{"dataset.D": [20]}))
    res = _invoke(["run", other, "--out", copy])
    assert res.exit_code == 2, res.output
    assert "--fresh" in res.output
    assert "dataset.D" in res.output  # the difference is named
    assert "Traceback" not in res.output
    # the earlier results are untouched
    assert (copy / "runs.csv").read_bytes() == (out / "runs.csv").read_bytes()
    res = _invoke(["run", other, "--out", copy, "--fresh", "--quiet"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(copy / "runs.csv")
    assert len(runs) == TINY_CELLS // 2 and set(runs["D"]) == {20}


def test_extend_keeps_the_finished_cells_of_a_widened_grid(finished_run, tmp_path):
    """A config that adds a grid point and a repetition resumes with --extend: the finished
    cells are read back, not rerun (cells.jsonl grows by the new cells only), and the tables
    equal a fresh run of the wider config. Without --extend it is refused and --extend named;
    --fresh with --extend exits 2."""
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    lines_before = len((copy / "cells.jsonl").read_text().splitlines())
    wider = tiny_config(**{"repetitions": 3, "methods.kernel_ogd.eta": [0.1, 0.3, 1.0]})
    wider_path = write_config(tmp_path / "wider.yaml", wider)
    res = _invoke(["run", wider_path, "--out", copy])
    assert res.exit_code == 2 and "--extend" in res.output, res.output
    res = _invoke(["run", wider_path, "--out", copy, "--extend", "--fresh"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    res = _invoke(["run", wider_path, "--out", copy, "--extend", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "extending" in res.output and "repetitions" in res.output
    wider_cells = 2 * 3 * (2 + 2 + 2 + 3)  # D x repetitions x settings of the four learners
    assert len(pd.read_csv(copy / "runs.csv")) == wider_cells
    lines = (copy / "cells.jsonl").read_text().splitlines()
    assert len(lines) - lines_before == wider_cells - TINY_CELLS  # only the new cells ran
    fresh = tmp_path / "fresh"
    assert _invoke(["run", wider_path, "--out", fresh, "--quiet"]).exit_code == 0
    timing = ["wall_s", "eval_s"]
    a = pd.read_csv(copy / "runs.csv").drop(columns=timing).sort_values("cell_id")
    b = pd.read_csv(fresh / "runs.csv").drop(columns=timing).sort_values("cell_id")
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    # a plain resume of the extended directory now needs no --extend
    assert _invoke(["run", wider_path, "--out", copy, "--quiet"]).exit_code == 0


def test_bad_arguments_exit_2(config_file, tmp_path):
    res = _invoke(["run", config_file, "--out", tmp_path / "r", "--jobs", "0"])
    assert res.exit_code == 2
    res = _invoke(["run", config_file, "--out", tmp_path / "r", "--scheduler", "tcp://x:1"])
    assert res.exit_code == 2
    assert "Traceback" not in res.output


def test_results_do_not_depend_on_cell_order_or_other_cells(finished_run, tmp_path):
    """Per-cell seeds are keyed by the cell, not by its position: reversing the grids, listing
    the methods in another order and dropping a method and a value of D leaves every remaining
    cell's row unchanged (apart from wall_s)."""
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    cfg = tiny_config(**{"dataset.D": [40]})
    cfg["methods"] = {
        "fixed_random": {"eta": [1.0, 0.3], "schedule": "inv_sqrt"},
        "shrinking_gradient": {"eta": [1.0, 0.3], "schedule": "constant", "B": 1.0},
        "doubly_sgd": {"eta": [1.0, 0.3], "schedule": "constant", "nu": 0.0},
    }
    path = write_config(tmp_path / "reordered.yaml", cfg)
    res = _invoke(["run", path, "--out", tmp_path / "r", "--quiet"])
    assert res.exit_code == 0, res.output
    drop = ["wall_s", "eval_s", "selected"]
    a = pd.read_csv(out / "runs.csv").drop(columns=drop).set_index("cell_id")
    b = pd.read_csv(tmp_path / "r" / "runs.csv").drop(columns=drop).set_index("cell_id")
    assert len(b) == 12 and set(b.index) <= set(a.index)
    pd.testing.assert_frame_equal(b.sort_index(), a.loc[b.index].sort_index(), check_dtype=False)
