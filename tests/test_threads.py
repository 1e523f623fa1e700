"""Threads of one cell (`ilnrun run --threads`, ILNRUN_THREADS): a resource knob that changes no
number (docs/algorithms.md §1.9)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ilnrun import threads
from tests.conftest import invoke, tiny_config, write_config

TIMING = ["wall_s", "eval_s", "train_s", "cell_s"]


def test_threads_per_cell_reads_the_environment(monkeypatch, capsys):
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    assert threads.threads_per_cell() == 1
    monkeypatch.setenv(threads.THREADS_ENV, " 3 ")
    assert threads.threads_per_cell() == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        assert threads.threads_per_cell() == 1
    err = capsys.readouterr().err
    assert "ILNRUN_THREADS='two' is not a whole number >= 1" in err


def _big_sg_config(tmp_path):
    # T = 30 and k = 600 features a round give Shrinking Gradient m = 4 810 samples a round, past
    # the size at which its compiled pass splits a round over threads
    cfg = tiny_config(**{"dataset.D": [40], "budget.dsgd_k": 600, "repetitions": 1})
    cfg["methods"] = {"shrinking_gradient": {"eta": [0.3, 1.0], "schedule": "constant"}}
    return write_config(tmp_path / "big.yaml", cfg)


def _numbers(out):
    runs = pd.read_csv(out / "runs.csv")
    return runs.drop(columns=[c for c in TIMING if c in runs.columns])


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_threads_change_no_number_and_are_recorded(tmp_path, monkeypatch, jobs):
    monkeypatch.setenv(threads.THREADS_ENV, "1")  # restored after the test
    path = _big_sg_config(tmp_path)
    one, two = tmp_path / "one", tmp_path / "two"
    res = invoke(["run", path, "--out", one, "--jobs", jobs, "-q"])
    assert res.exit_code == 0, res.output
    res = invoke(["run", path, "--out", two, "--jobs", jobs, "--threads", "2", "-q"])
    assert res.exit_code == 0, res.output
    m = pd.read_csv(two / "runs.csv")["m"]
    assert (m >= 4096).all()
    pd.testing.assert_frame_equal(_numbers(one), _numbers(two), check_exact=True)
    assert json.loads((one / "meta.json").read_text())["threads_per_cell"] == 1
    assert json.loads((two / "meta.json").read_text())["threads_per_cell"] == 2


def test_threads_must_be_a_whole_number(tmp_path, monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    res = invoke(["run", _big_sg_config(tmp_path), "--threads", "0"])
    assert res.exit_code == 2
    assert "--threads" in res.output and "Traceback" not in res.output
