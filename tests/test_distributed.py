"""The dask engine end to end: a real ``distributed.LocalCluster`` (worker processes, loopback
only) runs a three-learner config through the command line, ``--backend dask --scheduler
ADDRESS``, and gives the same ``runs.csv`` as ``--jobs 2`` with loky apart from ``wall_s``.
Skipped when dask.distributed is not installed (``pip install 'ilnrun[dask]'``; the ``dev`` extra
installs it, so ``make test`` runs it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import tiny_config, write_config

from ilnrun.cli import main

distributed = pytest.importorskip("distributed")

# 2 values of D x 2 repetitions x 3 budgeted learners x 2 step sizes = 24 cells
THREE_LEARNERS = {
    k: v for k, v in tiny_config()["methods"].items() if k in ("shrinking_gradient", "doubly_sgd")
}
THREE_LEARNERS["fixed_random"] = tiny_config()["methods"]["fixed_random"]
CELLS = 2 * 2 * 3 * 2


def _invoke(args: list) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def _runs(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "runs.csv").drop(columns=["wall_s", "eval_s"])


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        processes=True,
        host="127.0.0.1",
        n_workers=2,
        threads_per_worker=1,
        dashboard_address=None,
    ) as c:
        yield c


def test_dask_cluster_gives_the_same_runs_as_loky(cluster, tmp_path):
    cfg = write_config(tmp_path / "three.yaml", tiny_config(methods=THREE_LEARNERS))
    address = cluster.scheduler_address
    assert address.startswith("tcp://127.0.0.1:")
    res = _invoke(
        ["run", cfg, "--out", tmp_path / "dask", "--backend", "dask", "--scheduler", address]
    )
    assert res.exit_code == 0, res.output
    # progress reaches the end with the dask backend too (stderr is not a terminal here)
    assert f"{CELLS}/{CELLS} cells (100%)" in res.output
    res = _invoke(["run", cfg, "--out", tmp_path / "loky", "--jobs", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    a, b = _runs(tmp_path / "dask"), _runs(tmp_path / "loky")
    assert len(a) == CELLS and set(a["method"]) == set(THREE_LEARNERS)
    pd.testing.assert_frame_equal(a, b)


def test_quiet_dask_run_prints_no_progress(cluster, tmp_path):
    cfg = write_config(
        tmp_path / "one.yaml",
        tiny_config(
            **{"dataset.D": [20]}, methods={"fixed_random": THREE_LEARNERS["fixed_random"]}
        ),
    )
    address = cluster.scheduler_address
    res = _invoke(
        [
            "run",
            cfg,
            "--out",
            tmp_path / "q",
            "--backend",
            "dask",
            "--scheduler",
            address,
            "--quiet",
        ]
    )
    assert res.exit_code == 0, res.output
    assert "cells (" not in res.output
    assert len(pd.read_csv(tmp_path / "q" / "runs.csv")) == 2 * 2


def test_unreachable_scheduler_is_a_clean_error(tmp_path, monkeypatch):
    import dask

    cfg = write_config(tmp_path / "c.yaml", tiny_config())
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = _invoke(
            [
                "run",
                cfg,
                "--out",
                tmp_path / "x",
                "--backend",
                "dask",
                "--scheduler",
                "tcp://127.0.0.1:9",
            ]
        )
    assert res.exit_code == 1
    assert "cannot reach the dask scheduler at tcp://127.0.0.1:9" in res.output
    assert "Traceback" not in res.output


def test_backend_dask_without_address_starts_a_local_cluster(tmp_path):
    cfg = write_config(
        tmp_path / "one.yaml",
        tiny_config(**{"dataset.D": [20]}, methods={"doubly_sgd": THREE_LEARNERS["doubly_sgd"]}),
    )
    res = _invoke(["run", cfg, "--out", tmp_path / "local", "--backend", "dask", "--jobs", "2"])
    assert res.exit_code == 0, res.output
    res = _invoke(["run", cfg, "--out", tmp_path / "serial", "--quiet"])
    assert res.exit_code == 0, res.output
    pd.testing.assert_frame_equal(_runs(tmp_path / "local"), _runs(tmp_path / "serial"))
