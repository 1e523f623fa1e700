"""The numeric environment of a run (CPU, BLAS library and kernel, numpy's SIMD extensions, the
numeric packages' versions) in ``meta.json``, and a resume under another one said on stderr and
in the report (ilnrun.numeric_env, docs/protocol.md §10)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_CELLS, invoke, read_meta, tiny_config, write_config

from ilnrun import numeric_env
from ilnrun.report.sections.header import environments


@pytest.fixture
def run(tmp_path) -> tuple[Path, Path]:
    """The tiny config run once: (config path, results directory)."""
    path = write_config(tmp_path / "tiny.yaml", tiny_config())
    out = tmp_path / "results"
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0, r.output
    return path, out


def test_meta_records_the_numeric_environment(run):
    _, out = run
    meta = read_meta(out)
    env = meta["numeric_environment"]
    assert env == numeric_env.collect()  # what this process sees: the same machine and stack
    assert isinstance(env["cpu"], str) and env["cpu"]
    numpy_blas = [b for b in env["blas"] if b["used_by"] == "numpy"]
    assert numpy_blas, env["blas"]  # numpy's wheels bundle OpenBLAS (threadpoolctl lists it)
    for lib in env["blas"]:
        assert set(lib) == {"used_by", "internal_api", "version", "architecture", "library"}
        assert "/" not in lib["library"]  # the file's name, not where it lies
    simd = env["numpy_simd"]
    assert set(simd) == {"baseline", "found", "not_found"}
    assert all(isinstance(simd[k], list) for k in simd)
    assert set(env["versions"]) == set(numeric_env.PACKAGES)
    assert env["versions"]["numpy"] == np.__version__
    assert meta["numeric_environments"] == [
        {"since": meta["start"], "cells_done_before": 0, "environment": env}
    ]


def _fake_older_environment(out: Path, drop: int) -> dict:
    """Make the directory's finished cells look computed on another machine (CPU, BLAS kernel,
    numba, SIMD), and forget the last ``drop`` of them so that a resume computes them here."""
    meta = read_meta(out)
    old = copy.deepcopy(meta["numeric_environment"])
    old["cpu"] = "Old CPU 3000"
    for lib in old["blas"]:
        lib["architecture"] = "Katmai"  # no kernel an x86-64 OpenBLAS picks: any CORETYPE
    old["versions"]["numba"] = "0.60.0"
    old["numpy_simd"]["found"] = old["numpy_simd"]["found"][:1]
    meta["numeric_environment"] = old
    meta["numeric_environments"] = [
        {"since": "2020-01-01T00:00:00+00:00", "cells_done_before": 0, "environment": old}
    ]
    (out / "meta.json").write_text(json.dumps(meta))
    if drop:
        lines = (out / "cells.jsonl").read_text().splitlines(keepends=True)
        (out / "cells.jsonl").write_text("".join(lines[:-drop]))
    return old


def test_a_resume_under_another_environment_says_so(run):
    path, out = run
    old = _fake_older_environment(out, drop=5)
    now = numeric_env.collect()
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0, r.output
    notes = [line for line in r.stderr.splitlines() if "numeric environment changed" in line]
    assert len(notes) == 1, r.stderr  # one line
    note = notes[0]
    assert f"cpu: Old CPU 3000 -> {now['cpu']}" in note
    numpy_arch = [b["architecture"] for b in now["blas"] if b["used_by"] == "numpy"][0]
    assert f"blas[numpy].architecture: Katmai -> {numpy_arch}" in note
    assert f"versions.numba: 0.60.0 -> {now['versions']['numba']}" in note
    assert "numpy_simd.found: +" in note
    meta = read_meta(out)
    assert meta["numeric_environment"] == now
    assert [(e["cells_done_before"], e["environment"]) for e in meta["numeric_environments"]] == [
        (0, old),
        (TINY_CELLS - 5, now),
    ]
    # the report says the cells were computed under two environments, and which
    r = invoke(["report", out])
    assert r.exit_code == 0, r.output
    text = (out / "REPORT.md").read_text()
    assert "The cells were computed under 2 numeric environments" in text
    earlier = f"- from 2020-01-01T00:00:00+00:00, {TINY_CELLS - 5} cell(s): CPU Old CPU 3000,"
    assert earlier in text
    assert f"- from {meta['start']}, 5 cell(s): CPU {now['cpu']}," in text
    assert "changed: blas[numpy].architecture: Katmai -> " in text
    # resumed again under this environment: nothing more to say, nothing added
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0 and "numeric environment" not in r.stderr
    assert len(read_meta(out)["numeric_environments"]) == 2


def test_a_finished_directory_resumed_elsewhere_computed_its_cells_under_one(run):
    """Every cell finished before the environment changed: the note says so, the report does
    not claim two environments."""
    path, out = run
    _fake_older_environment(out, drop=0)
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0 and "numeric environment changed" in r.stderr
    assert environments(read_meta(out), TINY_CELLS) == []


def test_a_directory_of_an_earlier_ilnrun(run):
    """meta.json without an environment (written before it was recorded): the finished cells'
    environment is not recorded, which the note and the report say."""
    path, out = run
    meta = read_meta(out)
    del meta["numeric_environment"], meta["numeric_environments"]
    (out / "meta.json").write_text(json.dumps(meta))
    lines = (out / "cells.jsonl").read_text().splitlines(keepends=True)
    (out / "cells.jsonl").write_text("".join(lines[:-3]))
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0, r.output
    assert "numeric environment changed since the finished cells" in r.stderr
    assert "not recorded -> CPU " in r.stderr
    history = read_meta(out)["numeric_environments"]
    assert [e["environment"] is None for e in history] == [True, False]
    assert "not recorded (an earlier ilnrun)" in " ".join(environments(read_meta(out), TINY_CELLS))


def test_changes_name_every_difference():
    env = numeric_env.collect()
    assert numeric_env.changes(env, copy.deepcopy(env)) == []
    other = copy.deepcopy(env)
    other["versions"]["scipy"] = None
    other["machine"] = "aarch64"
    assert numeric_env.changes(env, other) == [
        f"machine: {env['machine']} -> aarch64",
        f"versions.scipy: {env['versions']['scipy']} -> —",
    ]
    # a record of garbage (a hand-edited meta.json) compares without an error
    assert numeric_env.changes({"blas": [1, {"x": [1]}]}, None) == ["blas[1].x: [1] -> —"]


def test_history_keeps_one_entry_per_environment_that_computed_cells():
    a, b = {"cpu": "A"}, {"cpu": "B"}
    h, changed = numeric_env.update_history(None, a, "t0", 0)
    assert h == [{"since": "t0", "cells_done_before": 0, "environment": a}] and changed == []
    # interrupted before any cell: the next run's environment replaces it, nothing to say
    h, changed = numeric_env.update_history({"numeric_environments": h}, b, "t1", 0)
    assert [e["environment"] for e in h] == [b] and changed == []
    h, changed = numeric_env.update_history({"numeric_environments": h}, a, "t2", 10)
    assert [e["cells_done_before"] for e in h] == [0, 10] and changed == ["cpu: B -> A"]
    assert numeric_env.computed_under(h, 30) == [(h[0], 10), (h[1], 20)]
    assert numeric_env.computed_under("garbage", 3) == []


PIN_PROBE = """
import importlib, json, os, sys
from ilnrun import numeric_env
os.environ.pop("OMP_NUM_THREADS", None)
with numeric_env.one_thread():
    # what the passes import on their first cell, inside the pin: numba's kernels (whose np.dot
    # calls scipy's BLAS) and scikit-learn's learners (an OpenMP runtime)
    for name in sys.argv[1:]:
        importlib.import_module(name)
    inside = {lib.filepath: lib.num_threads for lib in numeric_env._controller().lib_controllers}
print(json.dumps({"inside": inside, "omp_after": os.environ.get("OMP_NUM_THREADS")}))
"""


def test_one_thread_pins_the_libraries_a_first_cell_loads():
    """Every native library a cell's pass loads on its first call (numba's compiled ``np.dot``
    loads scipy's BLAS; scikit-learn an OpenMP runtime) runs one thread inside ``one_thread``,
    in a fresh process where none of them was loaded before. A dot product of more than 10 000
    numbers on a two-thread BLAS is summed in another order: the numbers of a ``--jobs 1`` run
    (cells pinned in the process) then differed from those of ``--jobs 2`` (workers pinned by
    their environment). The thread variables are put back on leaving."""
    import os
    import subprocess
    import sys

    modules = [
        "ilnrun.learners.shrinking_gradient_kernels",
        "ilnrun.learners.random_feature_kernels",
        "sklearn.kernel_approximation",
        "sklearn.linear_model",
    ]
    env = {k: v for k, v in os.environ.items() if k not in numeric_env.THREAD_VARIABLES}
    out = subprocess.run(
        [sys.executable, "-c", PIN_PROBE, *modules], capture_output=True, text=True, env=env,
        check=True, timeout=300,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["inside"], "threadpoolctl listed no native library"
    assert got["inside"] == dict.fromkeys(got["inside"], 1)
    assert got["omp_after"] is None
