"""``ilnrun.load``: a results directory read back, any cell rebuilt and reproduced from Python
bit for bit, and every directory that cannot be trusted refused with a clear message."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, tiny_config, write_config

import ilnrun
from ilnrun.learners import LEARNERS
from ilnrun.roundtrip import LoadError

# every built-in learner, a kernel map, regret on: every column a learner can write
SMALL = tiny_config(
    repetitions=2,
    **{
        "dataset.D": 12,
        "feature_map": {"kind": "fourier"},
        "evaluation": {"m_test": 20, "curve_points": 5, "regret_B": 1.0, "n_test_estimated": 40},
    },
)
SMALL["methods"]["shrinking_gradient"]["preset"] = ["budget", "theory"]
SMALL["methods"]["kernel_ridge"] = {"ridge": [0.01, 0.1]}
SMALL["methods"]["nystroem_ridge"] = {"rank": [10], "ridge": [0.01]}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """SMALL run with the command line (as a user would)."""
    tmp = tmp_path_factory.mktemp("roundtrip")
    path = write_config(tmp / "small.yaml", SMALL)
    out = tmp / "results"
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def loaded(run_dir):
    return ilnrun.load(run_dir)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(run_dir, dst)
    return dst


def test_tables_are_run_experiments(loaded, run_dir):
    """The tables equal what run_experiment returns for the same directory (resumed: no cell
    runs again), and the config is the resolved one."""
    again = ilnrun.run_experiment(loaded.config.as_dict(), out=run_dir)
    assert again.info["resumed"] == again.info["cells"] == len(loaded.runs)
    runs = again.runs.copy()
    runs["setting"] = runs["setting"].astype(object).fillna("")
    pd.testing.assert_frame_equal(loaded.runs, runs)
    pd.testing.assert_frame_equal(loaded.summary, again.summary)
    pd.testing.assert_frame_equal(loaded.curves, again.curves)
    assert loaded.config.as_dict() == again.config.as_dict()
    assert loaded.meta["cells"] == len(loaded.runs)
    assert set(loaded.runs["method"]) == set(LEARNERS)


def _random_cell_ids(loaded) -> list[str]:
    """One cell of every learner, picked at random (a fixed seed: the test can fail on any)."""
    pick = random.Random(19)
    return [pick.choice(list(g["cell_id"])) for _, g in loaded.runs.groupby("method")]


def test_a_random_cell_of_every_learner_reproduced_bit_for_bit(loaded):
    for cell_id in _random_cell_ids(loaded):
        c = loaded.cell(cell_id)
        row = c.row
        assert c.id == cell_id == row["cell_id"] and c.method == row["method"]
        assert c.repetition == row["repetition"]
        assert c.data_setting["D"] == row["D"]
        spec = LEARNERS[c.method]
        if c.size is not None:
            assert c.size == row[spec.budget.name]
        est = c.estimator().fit(c.X_train, c.y_train)
        # the online loss, the test loss and Algorithm 2's test loss, straight from the estimator
        assert float(np.mean(est.online_losses_)) == row["online_loss"], c.method
        test = float(0.5 * np.mean((est.predict(c.X_test) - c.y_test) ** 2))
        assert test == row["test_loss"], c.method
        val = float(0.5 * np.mean((est.predict(c.X_val) - c.y_val) ** 2))
        assert val == row["val_loss"], c.method
        if np.isfinite(row["test_loss_estimated"]):
            n = 40
            est.set_params(predict_mode="estimated")
            alg2 = float(0.5 * np.mean((est.predict(c.X_test[:n]) - c.y_test[:n]) ** 2))
            assert alg2 == row["test_loss_estimated"], c.method
            est.set_params(predict_mode="exact")
        # and every other number of the row, by the cell's own evaluation
        assert c.differences(est) == {}, c.method


def test_cell_attributes(loaded):
    sg = loaded.runs[
        (loaded.runs["method"] == "shrinking_gradient") & (loaded.runs["preset"] == "budget")
    ]
    c = loaded.cell(sg["cell_id"].iloc[0])
    assert c.setting["eta"] == sg["eta"].iloc[0] and c.setting["preset"] == "budget"
    assert c.size == sg["m"].iloc[0] > 0
    T, n_val, n_test = SMALL["dataset"]["T"], SMALL["dataset"]["n_val"], SMALL["dataset"]["n_test"]
    assert c.X_train.shape == (T, 12) and c.y_train.shape == (T,)
    assert len(c.y_val) == n_val and len(c.y_test) == n_test
    assert set(c.splits()) == {"train", "val", "test"}
    assert c.feature_map.name == "fourier"
    # the splits are those of every cell of the same repetition (shared instance)
    other = loaded.runs[
        (loaded.runs["repetition"] == c.repetition) & (loaded.runs["method"] == "kernel_ogd")
    ]
    np.testing.assert_array_equal(loaded.cell(other["cell_id"].iloc[0]).X_train, c.X_train)
    theory = loaded.runs[loaded.runs["preset"] == "theory"]
    assert loaded.cell(theory["cell_id"].iloc[0]).size is None  # the preset derives m from T
    assert loaded.cell(loaded.runs["cell_id"][0]).estimator().get_params()["center_y"] is False


def test_an_unknown_cell_is_refused(loaded):
    with pytest.raises(LoadError, match="no cell 'nope' in .*runs.csv"):
        loaded.cell("nope")


def test_refuses_what_is_not_ilnrun_results(tmp_path):
    with pytest.raises(LoadError, match="is not a directory"):
        ilnrun.load(tmp_path / "missing")
    with pytest.raises(LoadError, match="no complete ilnrun results"):
        ilnrun.load(tmp_path)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    for name in ("config.yaml", "runs.csv", "summary.csv", "cells.jsonl"):
        (foreign / name).write_text("not ours\n")
    with pytest.raises(LoadError, match="cannot be read as ilnrun results"):
        ilnrun.load(foreign)


def test_refuses_a_damaged_directory(run_dir, tmp_path):
    d = _copy(run_dir, tmp_path)
    (d / ".ilnrun-manifest.json").write_text("[1, 2")
    with pytest.raises(LoadError, match="cannot be identified as ilnrun's"):
        ilnrun.load(d)
    shutil.rmtree(d)
    d = _copy(run_dir, tmp_path)
    (d / "runs.csv").write_bytes(b"\x00\xff garbage")
    with pytest.raises(LoadError, match="cannot be read as ilnrun results"):
        ilnrun.load(d)
    shutil.rmtree(d)
    d = _copy(run_dir, tmp_path)
    (d / "summary.csv").unlink()
    with pytest.raises(LoadError, match="missing: summary.csv"):
        ilnrun.load(d)


def test_refuses_a_cell_whose_record_belongs_to_another_config(run_dir, tmp_path):
    d = _copy(run_dir, tmp_path)
    lines = (d / "cells.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["digest"] = "0" * 64
    (d / "cells.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    res = ilnrun.load(d)
    with pytest.raises(LoadError, match="no record of cell .* with the digest"):
        res.cell(rec["id"])
    res.cell(json.loads(lines[1])["id"])  # the others still load


def test_refuses_rebuilt_data_that_differ(run_dir, monkeypatch):
    """The dataset code changed since the run: the rebuilt splits do not give the row's
    yardsticks, and the cell is refused."""
    import ilnrun.cell as cell_mod

    res = ilnrun.load(run_dir)
    real = cell_mod.build_dataset

    def shifted(*args, **kwargs):
        data = real(*args, **kwargs)
        data.y_test = data.y_test + 1e-9
        return data

    monkeypatch.setattr(cell_mod, "build_dataset", shifted)
    with pytest.raises(LoadError, match="data rebuilt for cell .* differ.*test_loss_zero"):
        res.cell(res.runs["cell_id"][0])


def test_data_file_changed_or_gone(tmp_path):
    """A data file whose content changed since the run (or that is gone) is refused, named."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3))
    table = pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=X @ [1.0, -1.0, 0.5])
    table.to_csv(tmp_path / "data.csv", index=False)
    cfg = {
        "name": "filed",
        "repetitions": 1,
        "dataset": {"kind": "file", "path": "data.csv", "target": "y", "T": 30, "n_val": 20},
        "feature_map": {"kind": "fourier"},
        "methods": {"kernel_ogd": {"eta": 0.3}},
    }
    path = write_config(tmp_path / "filed.yaml", cfg)
    out = tmp_path / "res"
    ilnrun.run_experiment(path, out=out)
    res = ilnrun.load(out)
    c = res.cell(res.runs["cell_id"][0])
    assert c.differences() == {}
    table.assign(y=table["y"] * 2).to_csv(tmp_path / "data.csv", index=False)
    with pytest.raises(LoadError, match="data changed since the run .*data.csv holds other"):
        ilnrun.load(out)
    (tmp_path / "data.csv").unlink()
    with pytest.raises(LoadError, match="no longer validates"):
        ilnrun.load(out)


def test_a_jax_cell_is_not_reproduced_bit_for_bit(loaded):
    import dataclasses

    c = loaded.cell(loaded.runs["cell_id"][0])
    c.config = dataclasses.replace(c.config, engine="jax")
    with pytest.raises(LoadError, match="jax pass .* in distribution only"):
        c.reproduce()


def test_a_timed_out_cell_is_not_reproduced(loaded):
    c = loaded.cell(loaded.runs["cell_id"][0])
    c.row = c.row.copy()
    c.row["timed_out"] = True
    with pytest.raises(LoadError, match="timed out"):
        c.reproduce()


README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_round_trip_runs(tmp_path, monkeypatch, capsys):
    """The README's round trip runs as printed (in a scratch folder) and picks a real cell."""
    import re

    m = re.search(r"<!-- tested: round trip -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert m, "README.md lost its tested round-trip example"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(m.group(1), str(README), "exec"), namespace)  # noqa: S102
    cell, row = namespace["cell"], namespace["row"]
    assert cell.method == "shrinking_gradient" and cell.size == row["m"] > 0
    assert (tmp_path / "results" / "roundtrip" / "runs.csv").is_file()
    assert capsys.readouterr().out.split()[0] == str(cell.setting["eta"])
