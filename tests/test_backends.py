"""The worker processes of ``--jobs`` (``--backend``, ilnrun/engines/local.py): ``auto`` is
``fork`` on Linux with one thread a cell, ``loky`` otherwise; every backend gives the numbers of
``--jobs 1``; forked workers leave the run's signals to the run; a worker that dies ends the run
with a resume hint, the returned cells kept, and the same command resumes to the numbers of an
uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from ilnrun import threads
from tests.conftest import invoke, tiny_config, write_config

ROOT = Path(__file__).resolve().parent.parent
TIMING = ["wall_s", "eval_s"]
linux_fork = pytest.mark.skipif(not threads.fork_available(), reason="fork workers need Linux")

# 3 instances x (3 learners' settings) ... enough cells for several tasks of 2 workers
CONFIG = tiny_config(**{"name": "backends", "dataset.D": [12, 16, 20], "repetitions": 3})


def _numbers(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "runs.csv").drop(columns=TIMING)


def _backend(out: Path) -> str:
    return json.loads((out / "meta.json").read_text())["backend"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Path]:
    """The config and its ``--jobs 1`` run."""
    d = tmp_path_factory.mktemp("backends")
    cfg = write_config(d / "backends.yaml", CONFIG)
    res = invoke(["run", cfg, "--out", d / "ref", "-q"])
    assert res.exit_code == 0, res.output
    return cfg, d / "ref"


def test_auto_is_fork_on_linux_with_one_thread_a_cell(monkeypatch):
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "jax", raising=False)  # (another test may have loaded it)
    for b in ("fork", "loky", "dask"):
        assert threads.resolve_backend(b) == b
    want = "fork" if threads.fork_available() else "loky"
    assert threads.resolve_backend("auto") == want
    monkeypatch.setitem(sys.modules, "jax", sys)  # a session that imported jax: its threads
    if threads.fork_available():
        assert threads.resolve_backend("auto") == "loky"
        assert "jax" in (threads.fork_refused() or "")
    monkeypatch.delitem(sys.modules, "jax")
    assert threads.resolve_backend("auto") == want
    monkeypatch.setattr(threads, "threads_per_cell", lambda: 2)
    assert threads.resolve_backend("auto") == "loky"
    assert "--backend loky" in (threads.fork_refused() or "")


def _python(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``code`` run by a new Python process (this checkout's ilnrun; no jax loaded, as in
    ``ilnrun run``: workers are forked from a process without JAX's threads), ``args`` its
    ``sys.argv[1:]``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    env.pop(threads.THREADS_ENV, None)
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


CLI = "import sys; from ilnrun.cli import main; sys.argv[0] = 'ilnrun'; main()"


@pytest.mark.parametrize("backend", ["auto", "fork", "loky"])
def test_every_backend_gives_the_numbers_of_one_job(reference, tmp_path, backend):
    if backend == "fork" and not threads.fork_available():
        pytest.skip("fork workers need Linux")
    cfg, ref = reference
    out = tmp_path / backend
    res = _python(CLI, "run", str(cfg), "--out", str(out), "--jobs", "2", "--backend", backend)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "Warning" not in res.stderr, res.stderr
    pd.testing.assert_frame_equal(_numbers(out), _numbers(ref), check_exact=True)
    ran = "fork" if backend == "auto" and threads.fork_available() else backend
    assert _backend(out) == ran.replace("auto", "loky")  # the one that ran, recorded


def test_fork_with_threads_is_refused(reference, tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "threads_per_cell", lambda: 2)
    cfg, _ = reference
    res = invoke(["run", cfg, "--out", tmp_path / "o", "--jobs", "2", "--backend", "fork"])
    assert res.exit_code == 2, res.output
    assert "--backend loky" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


SIGNAL_STATE = """
import json, os, signal, sys
from ilnrun.engines import local

def report(exp, cells):
    wakeup = signal.set_wakeup_fd(-1)
    yield {
        "pid": os.getpid(),
        "sigint": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
        "sigterm": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "wakeup": wakeup,
        "cells": list(cells),
    }

local.run_cells = report
signal.set_wakeup_fd(os.open(os.devnull, os.O_WRONLY | os.O_NONBLOCK))
signal.signal(signal.SIGTERM, lambda *a: None)
signal.signal(signal.SIGINT, signal.default_int_handler)  # (started in the background: ignored)
state = []
local.execute_forked(None, [[i] for i in range(6)], 2, state.append)
mine = signal.getsignal(signal.SIGINT) == signal.default_int_handler
print(json.dumps({"parent": os.getpid(), "state": state, "parent_sigint_kept": mine}))
"""


@linux_fork
def test_a_forked_worker_leaves_the_signals_to_the_run():
    """In a forked worker Ctrl-C is ignored (the run, which gets it too, ends the workers),
    SIGTERM has its default action and the run's wake-up descriptor is gone (the run's watchdog
    would read a worker's signals as its own); the run's own handlers are untouched."""
    res = _python(SIGNAL_STATE)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    state = got["state"]
    assert sorted(c for r in state for c in r["cells"]) == list(range(6))
    assert all(r["pid"] != got["parent"] for r in state)
    assert all(r["sigint"] and r["sigterm"] and r["wakeup"] == -1 for r in state), state
    assert got["parent_sigint_kept"]


KILLED = """
import os, signal, sys
from ilnrun.engines import local

parent, real, tasks = os.getpid(), local.run_cells, []

def dies_on_its_third_task(exp, cells):
    if os.getpid() != parent:
        tasks.append(1)  # (this worker's own count)
        if len(tasks) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(exp, cells)

local.run_cells = dies_on_its_third_task
from ilnrun.cli import main
sys.argv[0] = "ilnrun"
main()
"""


@linux_fork
def test_a_killed_worker_ends_the_run_and_the_run_resumes(reference, tmp_path):
    cfg, ref = reference
    out = tmp_path / "o"
    res = _python(KILLED, "run", str(cfg), "--out", str(out), "--jobs", "2", "--backend", "fork")
    assert res.returncode == 1, res.stderr
    assert "error: a worker process ended while running cells" in res.stderr, res.stderr
    assert "resume with: ilnrun run" in res.stderr and "Traceback" not in res.stderr
    saved = (out / "cells.jsonl").read_bytes().count(b"\n")
    assert 0 < saved < len(_numbers(ref))
    res = _python(CLI, "run", str(cfg), "--out", str(out), "--jobs", "2", "-q")
    assert res.returncode == 0, res.stderr
    pd.testing.assert_frame_equal(_numbers(out), _numbers(ref), check_exact=True)


@linux_fork
def test_ctrl_c_to_the_process_group_stops_the_workers_too(reference, tmp_path):
    """Ctrl-C reaches every process of the terminal's group: the run exits 130 with the resume
    hint, no worker outlives it, and the same command resumes to the uninterrupted numbers."""
    cfg = write_config(tmp_path / "longer.yaml", {**CONFIG, "repetitions": 40})
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "ilnrun.cli", "run", str(cfg), "--out", str(out), "--jobs", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    log, t0 = out / "cells.jsonl", time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < 120:
        if log.exists() and log.read_bytes().count(b"\n") >= 40:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err
    assert "interrupted by SIGINT" in err and "Traceback" not in err, err
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):  # no process of the run's group is left
        os.killpg(proc.pid, 0)
    res = subprocess.run(cmd + ["-q"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    whole = tmp_path / "whole"
    res = invoke(["run", cfg, "--out", whole, "-q"])
    assert res.exit_code == 0, res.output
    pd.testing.assert_frame_equal(_numbers(out), _numbers(whole), check_exact=True)
