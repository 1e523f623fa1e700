"""Memory and time estimates that hold (ilnrun/config/resources.py): each stage from the rows
actually counted, checked before any dataset is built, for ``--jobs`` workers at once, and the
refusal names the key that helps. Sizes are made large on paper only: the tables are small NPZ
files and the machine's memory is monkeypatched, so nothing here allocates what it estimates."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import invoke, tiny_config, write_config

from ilnrun import cell
from ilnrun import config as C
from ilnrun.config import resources


def _npz(path, rows: int) -> str:
    rng = np.random.default_rng(0)
    np.savez(path, u=rng.standard_normal(rows), v=rng.standard_normal(rows), y=rng.random(rows))
    return str(path)


def _table_config(path: str, T: int, n_val: int, methods: dict, **limits) -> dict:
    cfg = tiny_config()
    cfg["repetitions"] = 2
    cfg["dataset"] = {"kind": "file", "path": path, "target": "y", "T": T, "n_val": n_val}
    cfg["feature_map"] = {"kind": "relu"}
    cfg["methods"] = methods
    if limits:
        cfg["limits"] = limits
    return cfg


@pytest.fixture
def no_run(monkeypatch):
    """A run that would start fails the test instead of allocating what the estimate refuses."""

    def started(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr("ilnrun.experiment.run", started)


@pytest.fixture
def machine(monkeypatch):
    """Set this machine's memory (GiB) and CPUs as the estimate sees them."""

    def set_(gb: float, cpus: int = 8) -> None:
        monkeypatch.setattr(resources, "machine_memory_gb", lambda: gb)
        monkeypatch.setattr(resources, "usable_cpus", lambda: cpus)
        monkeypatch.setattr("ilnrun.api.cpus", lambda: cpus)

    return set_


def test_a_table_uses_its_counted_test_rows(tmp_path, machine, no_run):
    """400 000 rows with n_test: rest are 397 900 test rows: the test kernel block alone is
    8 · 397 900 · 2 000 bytes = 5.9 GiB (the old guess, 10 (T + n_val) rows, said 0.4 GiB in all).
    Refused before any work, naming the key that helps."""
    machine(64)
    path = _npz(tmp_path / "big.npz", 400_000)
    cfg = _table_config(path, 2000, 100, {"kernel_ogd": {"eta": 0.1}}, max_memory_gb=2.0)
    res = invoke(["run", write_config(tmp_path / "c.yaml", cfg), "--out", tmp_path / "o", "-q"])
    assert res.exit_code == 2, res.output
    assert "limits.max_memory_gb" in res.output and "lower dataset.n_test" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "o" / "cells.jsonl").exists()
    cfg["limits"] = {"max_memory_gb": 1000.0}
    est = resources.largest_cell(C.load(write_config(tmp_path / "c2.yaml", cfg)))
    assert est["estimate"].sizes == (2000, 100, 397_900, 2)


def _issue_example(tmp_path) -> str:
    """All of a 20 190-row table with T = 18 000 and n_test: rest (1 190 test rows), kernel ridge
    beside Shrinking Gradient: the run worked with a 13.1 GB peak."""
    path = _npz(tmp_path / "t.npz", 20_190)
    methods = {"kernel_ridge": {"ridge": 1e-3}, "shrinking_gradient": {"eta": 0.3}}
    return str(write_config(tmp_path / "c.yaml", _table_config(path, 18_000, 1_000, methods)))


def test_what_fits_is_not_refused(tmp_path, machine):
    """Estimated from the counted rows, the example needs ~13 GiB a worker (kernel ridge's five
    T x T matrices): accepted on a 32 GiB machine (the old guess said 33.7 GiB and refused)."""
    machine(32)
    path = _issue_example(tmp_path)
    res = invoke(["validate", path])
    assert res.exit_code == 0, res.output
    est = resources.largest_cell(C.load(path))
    assert est["estimate"].sizes[:3] == (18_000, 1_000, 1_190)
    assert 12 < est["memory"] / 2**30 < 14.5  # measured: 13.1 GB peak
    res = invoke(["validate", path, "--jobs", "2"])
    assert res.exit_code == 2, res.output  # two workers of ~13 GiB do not fit 80% of 32 GiB
    assert "lower --jobs (at most 1 workers fit)" in res.output
    machine(64)
    assert invoke(["validate", path, "--jobs", "2"]).exit_code == 0


def test_jobs_workers_are_refused_before_the_run_starts(tmp_path, machine, no_run):
    machine(32)
    path = _issue_example(tmp_path)
    res = invoke(["run", path, "--out", tmp_path / "o", "--jobs", "2", "-q"])
    assert res.exit_code == 2, res.output
    assert "--jobs" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_the_bandwidth_check_builds_nothing_that_does_not_fit(tmp_path, machine, monkeypatch):
    """D = 30 000 000 with the fourier map's median bandwidth: the sizes are refused before the
    bandwidth check would build the dataset (10 GiB inside validate)."""
    machine(16)

    def never(*a, **k):
        raise AssertionError("a dataset was built during validation")

    monkeypatch.setattr("ilnrun.config.schema.build_dataset", never)
    cfg = tiny_config(**{"dataset.D": 30_000_000, "feature_map": {"kind": "fourier"}})
    cfg["methods"] = {"fixed_random": {"eta": 0.1}}
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    assert res.exit_code == 2, res.output
    assert "limits.max_memory_gb" in res.output and "dataset.D" in res.output


@pytest.mark.parametrize(
    ("change", "knob"),
    [
        ({"dataset.n_test": 50_000_000}, "lower dataset.n_test"),
        ({"dataset.D": 200_000_000}, "dataset.D"),
        ({"evaluation.m_test": 10_000_000_000}, "lower evaluation.m_test"),
        ({"budget.dsgd_k": 20_000_000}, "lower budget.dsgd_k"),
        (
            {"methods": {"shrinking_gradient": {"preset": "theory", "B": 1000.0}}},
            "lower methods.shrinking_gradient.c or methods.shrinking_gradient.B",
        ),
        (
            {"evaluation.regret_B": 1.0, "dataset.T": 18_000, "feature_map": {"kind": "relu"}},
            "lower evaluation.regret_B (null: no regret) or dataset.T",
        ),
    ],
    ids=["n_test", "D", "m_test", "dsgd_k", "theory B", "regret"],
)
def test_the_refusal_names_the_key_that_helps(tmp_path, machine, change, knob):
    machine(16)
    res = invoke(["validate", write_config(tmp_path / "c.yaml", tiny_config(**change))])
    assert res.exit_code == 2, res.output
    assert "limits.max_memory_gb" in res.output and knob in res.output, res.output


def test_validate_prints_each_learners_time_and_memory(config_file):
    res = invoke(["validate", config_file])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for name in ("shrinking_gradient", "doubly_sgd", "fixed_random", "kernel_ogd"):
        (line,) = [x for x in lines if x.startswith(f"#   {name}: ~")]
        assert " s (T=30)" in line and "MiB" in line
    assert any("rough" in x for x in lines)
    assert any(x.startswith("# cells: 32; largest cell") for x in lines)


def test_the_regret_kernel_matrix_is_estimated():
    """relu at T = 10 000: the cached T x T training kernel and four more T x T matrices while
    it is decomposed (measured: 5.1 T^2 doubles with the kernel)."""
    cfg = C.resolve(
        tiny_config(
            **{
                "dataset.T": 10_000,
                "dataset.D": 20,
                "feature_map": {"kind": "relu"},
                "evaluation.regret_B": 1.0,
                "methods": {"shrinking_gradient": {"eta": 0.3}},
                "limits": {"max_memory_gb": 1000.0},
            }
        )
    )
    est = resources.largest_cell(cfg)["estimate"]
    what = {s.what: s.bytes for s in est.stages}
    assert what["training kernel T x T (regret)"] == 8 * 10_000**2
    assert what["eigendecomposition (regret)"] == 4 * 8 * 10_000**2
    assert est.worker > est.instances * 8 * 10_000**2 + 4 * 8 * 10_000**2


def test_a_worker_keeps_as_many_instances_as_the_estimate_counts():
    assert resources.INSTANCE_CACHE == cell._CACHE_SIZE
