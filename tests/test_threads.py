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
    monkeypatch.setattr(threads, "usable_cpus", lambda: 8)
    assert threads.threads_per_cell() == 1
    monkeypatch.setenv(threads.THREADS_ENV, " 3 ")
    assert threads.threads_per_cell() == 3
    for bad in ("0", "-2", "two", "1.5", "\uff12", "1_0", "+3", "9" * 5000):
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        assert threads.threads_per_cell() == 1
        with pytest.raises(ValueError, match=threads.THREADS_ENV):
            threads.requested_threads()
    err = capsys.readouterr().err
    assert "ILNRUN_THREADS='two' is not a whole number >= 1" in err
    # more threads than CPUs: capped to the CPUs (what was asked stays readable)
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    monkeypatch.setenv(threads.THREADS_ENV, "300")
    assert threads.threads_per_cell() == 2
    assert threads.requested_threads() == 300
    threads.set_threads_per_cell(10**30)
    assert threads.threads_per_cell() == 2


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
    recorded = json.loads((two / "meta.json").read_text())["threads_per_cell"]
    assert recorded == min(2, threads.usable_cpus())


def test_threads_must_be_a_whole_number(tmp_path, monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    res = invoke(["run", _big_sg_config(tmp_path), "--threads", "0"])
    assert res.exit_code == 2
    assert "--threads" in res.output and "Traceback" not in res.output


def test_threads_beyond_the_cpus_are_capped_in_the_workers(tmp_path, monkeypatch):
    """`--threads 5000 --jobs 2` ended a loky worker (joblib exported 5000 as its
    NUMBA_NUM_THREADS, OMP_NUM_THREADS...) with a traceback: the count is capped to the CPUs,
    with a note, in the parent, in meta.json and in the workers' thread limit."""
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    out = tmp_path / "o"
    res = invoke(
        ["run", _big_sg_config(tmp_path), "--out", out, "--jobs", "2", "--threads", "5000"]
    )
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    cpus = threads.usable_cpus()
    assert f"--threads 5000 (ILNRUN_THREADS) capped to {cpus}" in res.output
    assert json.loads((out / "meta.json").read_text())["threads_per_cell"] == cpus
    assert (pd.read_csv(out / "runs.csv")["m"] >= 4096).all()

    # what a worker of such a run is given as its thread limits
    import os

    from joblib import Parallel, delayed, parallel_config

    from ilnrun.engines.local import loky_options

    monkeypatch.setenv(threads.THREADS_ENV, "300")
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    with parallel_config(backend="loky", n_jobs=2, **loky_options(os.getpid())):
        seen = Parallel()(delayed(os.getenv)(v) for v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"))
    assert seen == ["2", "2"]


@pytest.mark.parametrize("value", ["\uff12", "two", "0", "1" * 40])
def test_a_bad_threads_variable_is_refused(tmp_path, monkeypatch, value):
    """ILNRUN_THREADS must be a whole number in ASCII digits: int() would read '２' (a full-width
    two) as 2. ``ilnrun run`` refuses it with exit status 2, naming the variable."""
    monkeypatch.setenv(threads.THREADS_ENV, value)
    out = tmp_path / "o"
    res = invoke(["run", _big_sg_config(tmp_path), "--out", out, "-q"])
    assert res.exit_code == 2, res.output
    assert "ILNRUN_THREADS" in res.output and "Traceback" not in res.output
    assert not (out / "cells.jsonl").exists()


@pytest.mark.parametrize("option", ["--threads", "--jobs"])
@pytest.mark.parametrize("value", ["\uff12", "\u0663", "+2", "1_0", "0", "2.0"])
def test_a_count_not_in_ascii_digits_is_refused_on_the_command_line(tmp_path, option, value):
    """``--threads`` and ``--jobs`` read a count as ILNRUN_THREADS does: click's ``IntRange``
    took '２' (a full-width two), '٣', '+2' and '1_0' through ``int()``."""
    out = tmp_path / "o"
    res = invoke(["run", _big_sg_config(tmp_path), "--out", out, option, value, "-q"])
    assert res.exit_code == 2, res.output
    assert option in res.output and "ASCII digits" in res.output, res.output
    assert "Traceback" not in res.output and not out.exists()
