"""``curves.csv`` written by a child forked at the end of a run (``results.ChildWrite``,
``results.write_run_tables``): the same bytes as one process writes, the file recorded in the
manifest by the run alone; a child that fails leaves the file to the run, which writes it (or
raises what it raises); a child cancelled (an error or a stop in the run) is killed and reaped,
and its temporary file removed. Each check runs in a new Python process: the pytest process may
have loaded JAX, from which nothing is forked (``threads.fork_refused``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ilnrun import results as R
from ilnrun import threads
from tests.conftest import invoke, tiny_config, write_config

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not threads.fork_available(), reason="a fork needs Linux")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished run's directory (several learners, curves of every selected cell)."""
    d = tmp_path_factory.mktemp("child_write")
    cfg = write_config(d / "cw.yaml", tiny_config(**{"name": "cw", "repetitions": 2}))
    res = invoke(["run", cfg, "--out", d / "out", "-q"])
    assert res.exit_code == 0, res.output
    return d / "out"


def _process(code: str, *args: str, **options) -> subprocess.CompletedProcess:
    """``code`` run by a new Python process (this checkout's ilnrun, no JAX, one thread a
    cell), ``args`` its ``sys.argv[1:]``; ``options`` go to ``subprocess.run``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(threads.THREADS_ENV, None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env, capture_output=True, text=True, timeout=300, **options,
    )  # fmt: skip


# the command line in such a process (after the lines of a script that set it up)
CLI = """
from ilnrun.cli import main
sys.argv[0] = "ilnrun"
main()
"""


def _python(code: str, *args: str) -> str:
    """:func:`_process` of ``code``, which must succeed without a warning; its stdout."""
    res = _process(code, *args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "Warning" not in res.stderr, res.stderr
    return res.stdout


# the records, order and keys of a finished directory, as the run hands them to the tables
PRELUDE = """
import json, os, shutil, sys, time
from pathlib import Path
import yaml
from ilnrun import config as C, results as R
from ilnrun.experiment import dataset_keys
src, work = Path(sys.argv[1]), Path(sys.argv[2])
cfg = C.resolve(yaml.safe_load((src / "config.yaml").read_text()))
order = {c.id: i for i, c in enumerate(C.cells(cfg))}
records = [json.loads(line) for line in open(src / "cells.jsonl")]
keys = dataset_keys(cfg.dataset)
modes = R.select_modes(cfg.evaluation.select_on, cfg.methods)
forked = []
class Spy(R.ChildWrite):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        forked.append(self.pid)
R.ChildWrite = Spy
def leftovers(d):
    return sorted(p.name for p in Path(d).iterdir() if p.name.endswith(".tmp"))
"""


def test_tables_by_a_child_are_those_of_one_process(finished, tmp_path):
    code = (
        PRELUDE
        + """
R.FORK_CURVE_POINTS = 0  # a child, however small the table
shutil.copytree(src, work)
runs = R.write_run_tables(work, records, order, keys, modes)
assert forked and forked[0] is not None, forked  # a child wrote curves.csv
want = R.build_tables(records, order, keys, modes)
for name, df in zip(("runs.csv", "summary.csv", "curves.csv"), want):
    assert (work / name).read_bytes() == df.to_csv(index=False).encode(), name
assert runs.equals(want[0])
written = R.read_written(work)
for name in ("runs.csv", "summary.csv", "curves.csv"):
    assert written[name] == R.file_entry(work / name), name  # recorded by the run
assert leftovers(work) == []
print("ok")
"""
    )
    assert _python(code, str(finished), str(tmp_path / "w")).strip() == "ok"


def test_small_tables_and_dask_runs_write_them_in_the_run(finished, tmp_path):
    code = (
        PRELUDE
        + """
shutil.copytree(src, work)
R.write_run_tables(work, records, order, keys, modes)
assert forked == [None], forked  # fewer rows of curves.csv than FORK_CURVE_POINTS: no child
R.FORK_CURVE_POINTS = 0
R.write_run_tables(work, records, order, keys, modes, child=False)  # (a run on dask)
assert forked == [None, None], forked
print("ok")
"""
    )
    assert _python(code, str(finished), str(tmp_path / "w")).strip() == "ok"


def test_a_failing_child_leaves_the_file_to_the_run(finished, tmp_path):
    code = (
        PRELUDE
        + """
work.mkdir()
parent = os.getpid()
def make():
    if os.getpid() != parent:
        raise OSError(28, "No space left on device")  # in the child only
    return b"made by the run"
w = R.ChildWrite(work / "f.csv", make)
assert w.pid is not None
w.join()
w.cancel()
assert (work / "f.csv").read_bytes() == b"made by the run"
assert leftovers(work) == []
def fails():
    raise OSError(28, "No space left on device")
w = R.ChildWrite(work / "g.csv", fails)
try:
    w.join()  # the run's own attempt raises what it raises
except OSError as exc:
    assert exc.errno == 28
else:
    raise AssertionError("no error")
finally:
    w.cancel()
assert not (work / "g.csv").exists() and leftovers(work) == []
print("ok")
"""
    )
    assert _python(code, str(finished), str(tmp_path / "w")).strip() == "ok"


def test_a_cancelled_child_is_killed_and_its_temporary_file_removed(finished, tmp_path):
    code = (
        PRELUDE
        + """
work.mkdir()
parent = os.getpid()
path = work / "f.csv"
def make():  # in the child: as if killed halfway through its temporary file
    if os.getpid() != parent:
        R.ChildWrite._tmp(w, os.getpid()).write_bytes(b"half")
        time.sleep(60)
    return b"x"
w = R.ChildWrite.__new__(R.ChildWrite)
R.ChildWrite.__init__(w, path, make)
pid = w.pid
while not leftovers(work):
    time.sleep(0.01)
assert R.sweep_temporaries(work, ["f.csv"], min_age_s=3600) == 0  # (a young file: kept)
assert R._temporary_pattern(["f.csv"]).fullmatch(leftovers(work)[0])  # swept when old
t = time.monotonic()
w.cancel()
assert time.monotonic() - t < 10  # killed, not waited for
try:
    os.waitpid(pid, os.WNOHANG)
except ChildProcessError:
    pass  # reaped: no zombie left
else:
    raise AssertionError("the child was not reaped")
assert leftovers(work) == [] and not path.exists()
print("ok")
"""
    )
    assert _python(code, str(finished), str(tmp_path / "w")).strip() == "ok"


def test_a_run_with_a_child_writes_the_tables_of_a_run_without(finished, tmp_path):
    """The whole command: ``curves.csv`` by a child (no curve is too small) and by the run
    (none is large enough) are the same bytes, and the manifest vouches for both."""
    run = (
        """
import sys
from ilnrun import results as R
R.FORK_CURVE_POINTS = int(sys.argv.pop(1))
"""
        + CLI
    )
    cfg = finished / "config.yaml"
    for points, name in ((0, "child"), (10**12, "alone")):
        res = _process(run, str(points), "run", str(cfg), "--out", str(tmp_path / name), "-q")
        assert res.returncode == 0, res.stderr
    a, b = tmp_path / "child", tmp_path / "alone"
    assert (a / "curves.csv").read_bytes() == (b / "curves.csv").read_bytes()
    for d in (a, b):
        written = R.read_written(d)
        for name in ("runs.csv", "summary.csv", "curves.csv"):
            assert written[name] == R.file_entry(d / name), (d, name)
        assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]


def test_a_stop_while_the_child_writes_kills_it(finished, tmp_path):
    """Ctrl-C while the child writes ``curves.csv``: the run stops as a stop during the tables
    does (exit 130, the resume hint); the child, which leaves Ctrl-C to the run, is killed by
    it, so no ``curves.csv`` appears later and no temporary file is left."""
    run = (
        """
import os, signal, sys, time
from ilnrun import results as R
R.FORK_CURVE_POINTS = 0
parent, curves, summarize = os.getpid(), R._curves_table, R.summarize
def slow_curves(*a):
    if os.getpid() != parent:  # (the child's mark: it was forked)
        open(sys.argv[-1] + ".child", "w").close()
    time.sleep(3)  # in the child: still writing when the stop lands
    return curves(*a)
def stopped(*a):
    for _ in range(1000):  # the child has started writing
        if os.path.exists(sys.argv[-1] + ".child"):
            break
        time.sleep(0.01)
    os.killpg(0, signal.SIGINT)  # as Ctrl-C: the whole process group
    time.sleep(1)
    return summarize(*a)
R._curves_table, R.summarize = slow_curves, stopped
"""
        + CLI
    )
    out = tmp_path / "o"
    cfg = finished / "config.yaml"
    res = _process(run, "run", str(cfg), "--out", str(out), start_new_session=True)
    assert res.returncode == 130, res.stderr
    assert "resume with" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert Path(f"{out}.child").exists()
    time.sleep(4)  # longer than the child would have taken
    assert not (out / "curves.csv").exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
