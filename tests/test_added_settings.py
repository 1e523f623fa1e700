"""A results directory written before a dataset parameter existed resumes: its kept rows get the
parameter's value, so the tables neither split old and new rows nor fail on them."""

from __future__ import annotations

import json

import pandas as pd
from conftest import invoke, write_config

from ilnrun import config as C
from ilnrun.experiment import fill_added_settings
from ilnrun.results import seal

TEACHER = {
    "name": "added",
    "seed": 0,
    "repetitions": 2,
    "dataset": {"kind": "teacher", "D": 3, "T": 12, "n_val": 6, "n_test": 6, "sparsity": 2},
    "feature_map": {"kind": "relu"},
    "budget": {"dsgd_k": 1},
    "methods": {"doubly_sgd": {"eta": [0.1, 0.3]}},
}


def test_a_kept_row_without_an_added_setting_gets_the_cells_value():
    exp = C.resolve(TEACHER)
    cells = C.cells(exp)
    done = {c.id: {"id": c.id, "row": {"D": 3}} for c in cells}
    done["not-a-cell"] = {"id": "not-a-cell", "row": {}}
    fill_added_settings(done, cells)
    assert all(done[c.id]["row"]["kernel_samples"] == 100_000 for c in cells)
    assert done["not-a-cell"]["row"] == {}  # a record of no current cell is left alone


def test_a_run_whose_records_lack_the_setting_resumes(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", TEACHER)
    out = tmp_path / "out"
    assert invoke(["run", str(cfg), "--out", str(out), "-q"]).exit_code == 0
    log = out / "cells.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    assert all("kernel_samples" in rec["row"] for rec in lines)
    # as a version before the key existed wrote them: the rows have no such column
    for rec in lines:
        rec["row"].pop("kernel_samples")
    log.write_text("".join(json.dumps(seal(rec)) + "\n" for rec in lines))
    res = invoke(["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "4 resumed" in res.output  # kept, not run again
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["kernel_samples"] == 100_000).all()
