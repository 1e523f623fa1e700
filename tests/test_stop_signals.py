"""SIGTERM at the first moments of an ``ilnrun run --engine jax`` (ilnrun/stopping.py): while
Python starts, while jax is imported and compiles, while the first cells run. Every time the
command exits with the documented status (143; -15 where the signal comes before Python has run
ilnrun's first line, when SIGTERM's default action ends it), prints no traceback, and leaves a
directory that the same command resumes to the numbers of an uninterrupted run.

Before: 2 of 22 SIGTERMs about 3.5 s into a fresh jax run were swallowed (jax's
garbage-collection callback printed the exception and went on, and the stop was forgotten when
the cells started): the run finished every cell and exited 0, with a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("jax", reason="the jax engine needs jax (pip install 'ilnrun[jax]')")

from tests.conftest import invoke, tiny_config, write_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TIMING = ["wall_s", "eval_s", "train_s", "cell_s"]


def _numbers(d: Path) -> pd.DataFrame:
    runs = pd.read_csv(d / "runs.csv")
    return runs.drop(columns=[c for c in TIMING if c in runs.columns])


@pytest.fixture(autouse=True)
def _restore_signal_handlers():
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, h in old.items():
        signal.signal(sig, h)


def _interrupted(cfg: Path, out: Path, moment: str) -> tuple[int, str]:
    """``ilnrun run cfg --engine jax`` in a new process, sent SIGTERM at ``moment``: ``start``
    (at once), ``jax import`` (while jax is imported: Python's ``-X importtime`` lines show when
    jaxlib is in), ``first line`` (its first line on stderr: jax set up, the cells about to be
    compiled) or ``first cell`` (its first progress line)."""
    trace = ["-X", "importtime"] if moment == "jax import" else []
    proc = subprocess.Popen(
        [sys.executable, *trace, "-m", "ilnrun.cli", "run", str(cfg), "--out", str(out)]
        + ["--engine", "jax"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    if moment != "start":
        for line in proc.stderr:
            if line.startswith("import time:"):
                if moment == "jax import" and line.rstrip().endswith("jax._src.lib"):
                    break
                continue
            seen.append(line)
            if moment == "first line" or " cells (" in line:
                break
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=300)[1].splitlines(keepends=True)
    err = "".join(seen + [line for line in rest if not line.startswith("import time:")])
    return proc.returncode, err


def test_sigterm_in_the_first_moments_of_a_jax_run(tmp_path):
    cfg = write_config(tmp_path / "tiny.yaml", tiny_config())
    ref = tmp_path / "ref"
    assert invoke(["run", cfg, "--out", ref, "--engine", "jax", "-q"]).exit_code == 0
    for i, moment in enumerate(["start", "jax import", "first line", "first cell"]):
        out = tmp_path / f"run{i}"
        code, err = _interrupted(cfg, out, moment)
        assert code in ((128 + signal.SIGTERM, -signal.SIGTERM) if i == 0 else (143,)), err
        assert "Traceback" not in err and "Exception ignored" not in err, err
        if code == 143 and moment != "start":
            assert "interrupted by SIGTERM" in err, err
        res = invoke(["run", cfg, "--out", out, "--engine", "jax", "-q"])  # the same command
        assert res.exit_code == 0, res.output
        pd.testing.assert_frame_equal(_numbers(out), _numbers(ref), check_exact=True)
