"""``ilnrun.run_experiment`` (``ilnrun.api``) and the closing summary's evaluation counts."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import tiny_config, write_config

import ilnrun
from ilnrun.cli import main
from ilnrun.config import ConfigError
from ilnrun.overrides import OverrideError

SMALL = tiny_config(repetitions=1, **{"dataset.D": 20})  # 8 cells


def test_run_experiment_from_a_mapping_in_a_temporary_directory(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    res = ilnrun.run_experiment(SMALL, overrides=["methods.kernel_ogd.eta=0.5"])
    assert res.out_dir is None and list(scratch.iterdir()) == []  # cleaned up
    assert len(res.runs) == 8 - 1  # kernel_ogd's grid became one point
    assert set(res.runs["method"]) == set(SMALL["methods"])
    assert {"test_loss_mean", "test_loss_ci95"} <= set(res.summary.columns)
    assert {"t", "online_loss"} <= set(res.curves.columns)
    assert (res.runs["eval_s"] >= 0).all() and (res.runs["wall_s"] > 0).all()
    assert res.config["methods"]["kernel_ogd"]["eta"] == 0.5
    assert res.info["cells"] == 7 and res.info["resumed"] == 0


def test_run_experiment_writes_what_the_cli_writes(tmp_path):
    path = write_config(tmp_path / "small.yaml", SMALL)
    res = ilnrun.run_experiment(path, out=tmp_path / "api", jobs=1)
    assert res.out_dir == tmp_path / "api"
    for name in ("runs.csv", "summary.csv", "curves.csv", "config.yaml", "meta.json"):
        assert (tmp_path / "api" / name).exists()
    cli = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "cli"), "-q"])
    assert cli.exit_code == 0, cli.output
    drop = ["wall_s", "eval_s"]
    pd.testing.assert_frame_equal(
        res.runs.drop(columns=drop),
        pd.read_csv(tmp_path / "cli" / "runs.csv").drop(columns=drop),
    )
    again = ilnrun.run_experiment(path, out=tmp_path / "api")  # the same config: resumed
    assert again.info["resumed"] == 8
    pd.testing.assert_frame_equal(again.runs, res.runs)


def test_run_experiment_errors():
    with pytest.raises(ConfigError, match="did you mean 'T'"):
        ilnrun.run_experiment(SMALL, overrides=["dataset.TT=3"])
    with pytest.raises(OverrideError):
        ilnrun.run_experiment(SMALL, overrides=["dataset.T"])


def test_closing_message_when_evaluation_outweighs_training(tmp_path):
    """A large Algorithm-2 test estimate on every test point is counted and reported."""
    cfg = tiny_config(repetitions=1, **{"dataset.D": 20, "dataset.n_test": 200})
    cfg["methods"] = {"shrinking_gradient": {"eta": 0.3}}
    cfg["evaluation"] = {"m_test": 20000, "n_test_estimated": "all"}
    path = write_config(tmp_path / "slow.yaml", cfg)
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "evaluation took longer than training in 1 of 1 cells (shrinking_gradient: 1;" in (
        res.output
    )
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    assert (runs["eval_s"] > runs["wall_s"]).all()
    quick = ilnrun.run_experiment(SMALL)
    slower = (quick.runs["eval_s"] > quick.runs["wall_s"]).groupby(quick.runs["method"]).sum()
    assert quick.info["eval_slower"] == slower.to_dict()


def test_package_exports():
    assert ilnrun.run_experiment.__module__ == "ilnrun.api"
    assert ilnrun.ShrinkingGradientRegressor.__module__ == "ilnrun.estimators"
    with pytest.raises(AttributeError):
        _ = ilnrun.no_such_thing
    assert isinstance(ilnrun.Results.__dataclass_fields__, dict)
    assert Path(ilnrun.__file__).name == "__init__.py"


REPO = Path(__file__).resolve().parent.parent


def test_example_file_config_runs_and_matches_the_readme(monkeypatch):
    """configs/example_file.yaml (its data path relative to its own folder) runs from any
    working directory, and the README's worked example is the same config."""
    import re

    import yaml

    from ilnrun import config as C

    monkeypatch.chdir(REPO / "tests")  # not the config's folder: the path must still resolve
    committed = C.load(REPO / "configs/example_file.yaml")
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```yaml\n(name: example_file\n.*?)```", readme, re.S)
    assert block, "README lost the worked file-dataset example"
    shown = C.resolve(yaml.safe_load(block.group(1)), base_dir=REPO / "configs")
    assert {**shown, "description": ""} == {**committed, "description": ""}
    res = ilnrun.run_experiment(
        REPO / "configs/example_file.yaml",
        overrides=[
            "repetitions=1",
            "dataset.T=40",
            "budget.dsgd_k=1",
            "methods.doubly_sgd.eta=0.1",
        ],
    )
    assert len(res.runs) == 8 + 2 + 8 + 8  # doubly_sgd: one eta x 2 schedules
    assert set(res.runs["T"]) == {40} and set(res.runs["n_test"]) == {"rest"}
    assert res.runs["test_nmse"].notna().all()


def test_unusable_paths_are_refused_by_name(tmp_path, monkeypatch):
    """A config path or an out that the system cannot use (a NUL byte, a name too long, a
    directory given as the config) is a ConfigError / ArgumentError naming it, not a bare
    OSError or ValueError."""
    from ilnrun.api import ArgumentError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="cannot be read: File name too long"):
        ilnrun.run_experiment("x" * 5000 + ".yaml")
    with pytest.raises(ConfigError, match="is not a file"):
        ilnrun.run_experiment(str(tmp_path))
    with pytest.raises(ArgumentError, match="out holds a NUL byte"):
        ilnrun.run_experiment(SMALL, out="o\x00ut")
    assert list(tmp_path.iterdir()) == []


def test_the_tables_returned_are_those_written_under_a_tilde(tmp_path, monkeypatch):
    """``out='~/res'`` is the folder '~' of the working directory (as ``Path`` reads it); the
    tables returned are read from there, never from the home directory's ``res``."""
    home = tmp_path / "home"
    (home / "res").mkdir(parents=True)
    (home / "res" / "runs.csv").write_text("not,these\n1,2\n")
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    res = ilnrun.run_experiment(SMALL, out="~/res")
    assert (work / "~" / "res" / "runs.csv").is_file()
    assert len(res.runs) == 8 and "cell_id" in res.runs.columns
    pd.testing.assert_frame_equal(res.runs, pd.read_csv(work / "~" / "res" / "runs.csv"))


def test_a_full_disk_names_the_results_directory(tmp_path, monkeypatch):
    """A write that fails without a file name (a full disk while appending to the log) raises
    an OSError of the same errno naming the results directory, as the command line's line."""
    import errno
    import os

    from ilnrun import results as R

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(R.os, "write", full)
    out = tmp_path / "res"
    with pytest.raises(OSError) as caught:
        ilnrun.run_experiment(SMALL, out=out)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(out)
