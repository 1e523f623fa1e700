"""``bench/gpu.py``, the GPU figures of ``make bench`` (issue 28, item 4), without a GPU.

- Without a GPU it prints ``no GPU: skipped``, exits 0 and writes nothing (so ``make bench``
  passes on every machine); with ``--record`` it writes the report's GPU section from the
  recorded JSON, or says that none was recorded.
- ``--cpu-ok`` runs the script's logic at tiny sizes on jax's CPU backend (skipped where jax is
  not installed): the JSON holds every stage asked for, the jax and numpy engines agree in
  distribution, the jax passes ran whole, and the markdown section renders from the JSON,
  replacing an earlier one in the report between its markers.
- Bad arguments exit with status 2 and name the option.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "gpu.py"


def _module():
    """``bench/gpu.py`` imported as a module (its helpers, without running it), once."""
    if "bench_gpu" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_gpu"] = mod  # (its dataclasses look their module up)
        spec.loader.exec_module(mod)
    return sys.modules["bench_gpu"]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    env.pop("ILNRUN_TOY_PLUGINS", None)  # the script's subprocesses use the built-ins
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def _has_gpu() -> bool:
    try:
        import jax
    except ImportError:
        return False
    return jax.default_backend() != "cpu"


needs_cpu_only = pytest.mark.skipif(_has_gpu(), reason="a GPU is at hand: the script measures")


@needs_cpu_only
def test_no_gpu_skips_and_writes_nothing(tmp_path):
    res = _run("--out", str(tmp_path / "out"), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "no GPU: skipped" in res.stdout
    assert not (tmp_path / "out").exists()


@needs_cpu_only
def test_no_gpu_record_keeps_the_section(tmp_path):
    """``make bench`` writes the report anew, then this: the GPU section comes back, saying that
    no figures were recorded (no JSON beside the report), before the report's notes."""
    report = tmp_path / "REPORT.md"
    report.write_text("# Performance\n\n## 7. The jax engine\n\ntext\n\n## Notes\n\n- a note\n")
    res = _run("--record", "--report", str(report), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "no GPU: skipped" in res.stdout
    text = report.read_text()
    mod = _module()
    assert text.count(mod.BEGIN) == 1 and text.count(mod.END) == 1
    assert "No GPU figures have been recorded yet" in text
    assert text.index(mod.END) < text.index("## Notes") and "- a note" in text
    assert not (tmp_path / "gpu.json").exists()


def test_bad_arguments_exit_2():
    res = _run("--budget", "-3", timeout=60)
    assert res.returncode == 2 and "--budget" in res.stderr
    res = _run("--record", "--cpu-ok", timeout=60)
    assert res.returncode == 2 and "--record" in res.stderr
    res = _run("--from-json", "/nonexistent/gpu.json", timeout=60)
    assert res.returncode == 2 and "--from-json" in res.stderr
    for bad in ("figure1=x", "figure1=-5", "nonsense=10", "figure1"):
        res = _run("--cap", bad, timeout=60)
        assert res.returncode == 2 and "--cap" in res.stderr, bad


def test_compare_runs_per_learner(tmp_path):
    """figure1's cell-by-cell comparison: a learner equal to rounding, one that differs at
    random (equal in distribution) and one shifted by far more than its standard error."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 200
    base = rng.uniform(0.01, 0.02, size=3 * n)
    method = ["kernel_ogd"] * n + ["doubly_sgd"] * n + ["fixed_random"] * n
    noise = np.r_[np.zeros(n), rng.normal(0, 1e-3, n), 0.01 + rng.normal(0, 1e-3, n)]
    ids = [f"c{i}" for i in range(3 * n)]
    for name, loss in (("a", base + noise), ("b", base)):
        (tmp_path / name).mkdir()
        pd.DataFrame({"cell_id": ids, "method": method, "test_loss": loss}).to_csv(
            tmp_path / name / "runs.csv", index=False
        )
    out = _module().compare_runs(tmp_path / "a", tmp_path / "b")
    assert out["kernel_ogd"]["rounding"] and out["kernel_ogd"]["equal"]
    assert out["doubly_sgd"]["equal"] and not out["doubly_sgd"]["rounding"]
    assert not out["fixed_random"]["equal"] and out["fixed_random"]["z"] > 10
    assert all(v["cells"] == n for v in out.values())


def test_clock_allowance():
    mod = _module()
    clock = mod.Clock(100.0, reserve=5.0)
    assert 59 <= clock.allowance(60) <= 60
    assert 24 <= clock.allowance(60, keep=70) <= 25
    assert clock.allowance(60, keep=95) is None


def test_cpu_ok_runs_the_stages_and_records(tmp_path):
    pytest.importorskip("jax", reason="--cpu-ok runs the jax engine on jax's CPU backend")
    out = tmp_path / "out"
    # figure1 (three `ilnrun run`, about a minute here) and the second cell are left to the
    # script's own runs: the same code as the first cell's stage
    res = _run(
        "--cpu-ok", "--out", str(out), "--budget", "200", "--skip", "figure1", "--skip", "sg_big"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    R = json.loads((out / "gpu.json").read_text())
    mod = _module()
    assert R["schema"] == mod.SCHEMA and R["env"]["mode"] == "cpu-ok"
    assert R["env"]["device"]["backend"] == "cpu"
    assert R["env"]["search_method"] == "scan"  # on CPU the loop; no comparison made
    assert "search_loop" not in R["stages"]["sg"]
    program = (out / mod.PROGRAM_NAME).read_text()  # the first SG pass's XLA program
    assert program.startswith("HloModule") and "while" in program
    S = R["stages"]
    assert set(S) == {"distribution", "sg", "theorem1"}
    assert S["distribution"]["equal"], S["distribution"]
    shrinks = S["distribution"]["settings"]["shrinks"]["shrinks"]
    assert shrinks["numpy_mean"] > 0 and shrinks["jax_mean"] > 0  # the shrink count is compared
    T, m = mod.CPU_SIZES.sg[0]
    sg = S["sg"]
    assert (sg["T"], sg["D"]) == (T, mod.D_SG) and abs(sg["m"] - m) <= 1  # the budget rounds
    assert sg["jax"]["whole"] and sg["jax"]["rounds"] == T and sg["jax"]["diverged"] == 0
    assert sg["jax"]["samples"] == m * (T - 1)  # every round draws but the first
    assert sg["cpu"]["whole"] and sg["cpu"]["rounds"] == T and sg["same_rounds"] == T
    assert sg["cpu"]["samples"] == sg["jax"]["samples"]
    assert sg["speedup_whole_pass"] > 0 and sg["jax"]["compile_s"] > 0
    [b] = sg["batched"]
    assert b["cells"] == mod.CPU_SIZES.batch and b["rounds"] == T
    assert b["samples"] == mod.CPU_SIZES.batch * sg["jax"]["samples"]
    th = S["theorem1"]
    from ilnrun.learners.shrinking_gradient import theory_preset

    assert th["T"] == mod.CPU_SIZES.theorem1_T and th["D"] == 1000
    assert th["m"] == theory_preset(1.0, th["T"], 0.01)[1]  # configs/theorem1.yaml's B and c
    md = (out / "gpu.md").read_text()
    assert md.startswith(mod.BEGIN) and md.rstrip().endswith(mod.END)
    assert "CPU figures, a test of the script" in md and "not judged (CPU figures)" in md
    assert "**DIFFERENT**" not in md

    # recorded from the JSON into a report that has an earlier section: replaced, once
    report = tmp_path / "perf" / "REPORT.md"
    report.parent.mkdir()
    old = "\n".join(mod.render(None))
    report.write_text(f"# Performance\n\n{old}\n\n## Notes\n\n- a note\n")
    res = _run("--from-json", str(out / "gpu.json"), "--report", str(report), timeout=60)
    assert res.returncode == 0, res.stderr
    text = report.read_text()
    assert text.count(mod.BEGIN) == 1 and "No GPU figures" not in text
    assert json.loads((report.parent / "gpu.json").read_text()) == R
    res = _run("--render-only", "--report", str(report), timeout=60)
    assert res.returncode == 0, res.stderr
    assert report.read_text() == text  # rendered from the record beside the report

    # a figure1 stage renders too (its numbers here made up: the renderer is under test)
    R["stages"]["figure1"] = {
        "config": "configs/figure1_paper_grid.yaml",
        "overrides": [],
        "cells": 9600,
        "jax_cold": {"wall_s": 30.0, "cpu_s": 20.0, "jobs": 1},
        "jax_warm": {"wall_s": 10.0, "cpu_s": 9.0, "jobs": 1},
        "numpy": {"skipped": "out of time"},
        "compile_s": 20.0,
    }
    lines = "\n".join(mod.render(R))
    assert "| jax, warm | 10.0 | 9.0 | 1 | – | – |" in lines and "skipped: out of time" in lines
    # where a run's time went, from its runs.csv
    run = tmp_path / "f1"
    run.mkdir()
    (run / "runs.csv").write_text("cell_id,wall_s,eval_s\na,1.5,0.25\nb,2.5,0.5\n")
    split = mod._time_split(run)
    assert split == {"train_s": 4.0, "eval_s": 0.75}
    assert mod._time_split(tmp_path / "nowhere") == {}
    R["stages"]["figure1"]["jax_warm"].update(split)
    assert "| jax, warm | 10.0 | 9.0 | 1 | 4.0 | 0.8 |" in "\n".join(mod.render(R))
    R["stages"]["figure1"]["jax_warm"] = {"skipped": "did not finish in 47 s", "cells_done": 120}
    R["stages"]["figure1"]["note"] = "timed in a second run"
    lines = "\n".join(mod.render(R))
    assert "did not finish in 47 s (120 cells done)" in lines
    assert "; timed in a second run:" in lines


def test_the_search_as_a_loop_is_timed_against_the_unrolled_one(monkeypatch):
    """Off CPU the script times the SG cell's first rounds with the loop-form search too; here
    on jax's CPU backend, the main pass forced to the unrolled form: the same losses."""
    pytest.importorskip("jax", reason="the jax engine on jax's CPU backend")
    from ilnrun import jax_ops
    from ilnrun.engines import jax_runner

    mod = _module()
    ec = mod.engine_cell(mod.sg_config(600, 100))
    monkeypatch.setattr(jax_ops, "SEARCH_METHOD", "scan_unrolled")
    monkeypatch.setattr(jax_runner, "_PROGRAMS", {})
    main = mod.jax_pass(ec, ec.batch(1), 60.0)
    loop = mod.search_as_loop(ec, 60.0, main, main["losses_cell0"])
    assert loop["rounds"] == 600 and loop["same_losses"]
    assert loop["loop_us_per_round"] > 0 and loop["unrolled_us_per_round"] > 0
    assert jax_ops.SEARCH_METHOD is None  # put back: the engine chooses by backend again
    wrong = main["losses_cell0"].copy()
    wrong[-1] += 1e-12
    assert not mod.search_as_loop(ec, 60.0, main, wrong)["same_losses"]
    R = {"env": {"search_method": "scan_unrolled"}, "stages": {"sg": {"search_loop": loop}}}
    text = "\n".join(mod._search_lines(R))
    assert "`scan_unrolled`" in text and "the same losses: **yes**" in text


def test_a_failing_stage_is_recorded_and_the_next_runs(tmp_path, monkeypatch):
    """A stage that raises (out of device memory, say) is recorded with its error, the JSON is
    saved after every stage, and the section still renders."""
    mod = _module()

    def boom(*args):
        raise RuntimeError("RESOURCE_EXHAUSTED: out of memory")

    def fine(tmp, sizes, clock, keep):
        return {"config": "c.yaml", "overrides": [], "jax_cold": {"skipped": "out of time"}}

    monkeypatch.setattr(mod, "stage_distribution", boom)
    monkeypatch.setattr(mod, "stage_figure1", fine)
    saved = []
    stages = mod.measure(
        mod.CPU_SIZES,
        mod.Clock(100.0),
        {},
        {"sg", "sg_big", "theorem1"},
        tmp_path,
        lambda s: saved.append(sorted(s)),
    )
    assert "RESOURCE_EXHAUSTED" in stages["distribution"]["error"]
    assert stages["figure1"]["jax_cold"] == {"skipped": "out of time"}
    assert saved == [["distribution"], ["distribution", "figure1"]]
    R = {
        "schema": mod.SCHEMA,
        "env": {
            "mode": "gpu",
            "device": {"name": "X", "describe": "gpu (X, 1 device(s))"},
            "host_cpu": "c",
            "host_cores": 16,
            "versions": {},
            "date": "d",
        },
        "budget_s": 100.0,
        "wall_s": 1.0,
        "stages": {
            **stages,
            "sg_big": {"label": "SG cell", "skipped": "does not fit", "T": 10, "m": 5},
        },
    }
    text = "\n".join(mod.render(R))
    assert "failed: RuntimeError: RESOURCE_EXHAUSTED" in text
    row = next(line for line in text.splitlines() if "does not fit" in line)
    assert row.count("|") == 16  # the table's 15 columns
