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
from ilnrun import results as R
from ilnrun.learners import LEARNERS
from ilnrun.roundtrip import LoadError

# every registered learner, a kernel map, regret on: every column a learner can write
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
for _name, _spec in LEARNERS.items():  # any other registered learner (a plugin): its defaults
    if "square" not in _spec.supported_losses:
        continue  # a learner of ±1 labels only (nystroem_svm): tests/test_nystroem_classifiers.py
    SMALL["methods"].setdefault(
        _name, {"eta": 0.3} if any(p.name == "eta" for p in _spec.params) else {}
    )


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
    assert set(loaded.runs["method"]) == set(SMALL["methods"])  # every learner of real labels


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


@pytest.mark.parametrize("bad", [[1], ["x"], None, 3, b"abc", np.int64(3)])
def test_a_cell_id_that_is_not_a_string_is_refused(loaded, bad):
    with pytest.raises(LoadError, match=f"a cell id is a string .*not {type(bad).__name__}"):
        loaded.cell(bad)


def test_a_huge_cell_id_is_not_echoed(loaded):
    with pytest.raises(LoadError, match=r"no cell 'xxx.*… \(10000000 chars\)") as e:
        loaded.cell("x" * 10_000_000)
    assert len(str(e.value)) < 400


def test_files_linked_out_of_the_directory_are_refused(run_dir, tmp_path):
    """load() reads the results directory only: a symbolic link whose target lies outside it
    is refused, named; one inside it is read."""
    for name in ("runs.csv", "cells.jsonl", "meta.json"):
        d = _copy(run_dir, tmp_path)
        outside = tmp_path / f"elsewhere-{name}"
        shutil.move(d / name, outside)
        (d / name).symlink_to(outside)
        with pytest.raises(LoadError, match=f"{name} is a symbolic link to .*outside the results"):
            ilnrun.load(d)
        shutil.rmtree(d)
    d = _copy(run_dir, tmp_path)
    (d / "sub").mkdir()
    shutil.move(d / "runs.csv", d / "sub" / "runs.csv")
    (d / "runs.csv").symlink_to(Path("sub") / "runs.csv")
    assert len(ilnrun.load(d).runs) == len(pd.read_csv(run_dir / "runs.csv"))


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


@pytest.mark.parametrize("bad", [None, 5, ["x"], "", " ", "x" * 5000])
def test_a_path_that_names_no_directory_is_refused(bad, tmp_path, monkeypatch):
    """``load('')`` read the current directory (``--out ''`` is refused for the same reason),
    a non-path raised ``TypeError`` and a name too long an ``OSError``: each a LoadError."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LoadError) as err:
        ilnrun.load(bad)
    assert len(str(err.value)) < 300


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
    rec[R.VALUES_KEY] = R.values_digest(rec)  # a whole record, of another config
    (d / "cells.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    res = ilnrun.load(d)
    with pytest.raises(LoadError, match="no record of cell .* with the digest"):
        res.cell(rec["id"])
    res.cell(json.loads(lines[1])["id"])  # the others still load


def test_refuses_a_cell_whose_record_values_changed(run_dir, tmp_path):
    """A record edited after it was written is skipped, and the refusal says so (not that the
    record belongs to another config)."""
    d = _copy(run_dir, tmp_path)
    lines = (d / "cells.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["row"]["test_loss"] *= 1.001
    (d / "cells.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    res = ilnrun.load(d)
    with pytest.raises(LoadError, match="was skipped: its values changed since it was written"):
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
    with pytest.raises(LoadError, match="data rebuilt for cell .* differ.*test_loss_zero") as e:
        res.cell(res.runs["cell_id"][0])
    msg = str(e.value)
    # what differs, by how much, and why it may: the environment recorded, the threads
    row = res.runs.iloc[0]
    assert f"test_loss_zero: recorded {float(row['test_loss_zero'])!r}, rebuilt " in msg
    assert "relative difference " in msg and "test_loss_const: recorded" in msg
    assert "meta.json records this numeric environment" in msg
    assert "BLAS ran 1 thread(s) while rebuilding (the command line pins 1 per cell)" in msg
    assert "the dataset code or its source changed" in msg


def test_rebuilt_data_that_differ_under_another_environment(run_dir, tmp_path, monkeypatch):
    """A run recorded on another CPU / BLAS kernel: the refusal names the differences,
    recorded -> now."""
    import ilnrun.cell as cell_mod

    d = _copy(run_dir, tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    [entry] = meta["numeric_environments"]  # the environment the cells were computed under
    entry["environment"]["cpu"] = "Some Other CPU"
    for lib in entry["environment"]["blas"]:
        lib["architecture"] = "Katmai"  # no kernel an x86-64 OpenBLAS picks: any CORETYPE
    (d / "meta.json").write_text(json.dumps(meta))
    res = ilnrun.load(d)
    real = cell_mod.build_dataset

    def shifted(*args, **kwargs):
        data = real(*args, **kwargs)
        data.y_test = data.y_test * (1 + 1e-15)
        return data

    monkeypatch.setattr(cell_mod, "build_dataset", shifted)
    with pytest.raises(LoadError, match="numeric environment differs") as e:
        res.cell(res.runs["cell_id"][0])
    assert "cpu: Some Other CPU -> " in str(e.value)
    assert "blas[numpy].architecture: Katmai -> " in str(e.value)
    del meta["numeric_environment"], meta["numeric_environments"]
    (d / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(LoadError, match="meta.json records no numeric environment"):
        ilnrun.load(d).cell(res.runs["cell_id"][0])


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


def test_the_estimator_of_a_cell_runs_one_blas_thread(loaded, monkeypatch):
    """fit, predict and score of a loaded cell's estimator (and of its clone) run with BLAS
    pinned to one thread, whatever the session allows; a plain estimator leaves BLAS alone."""
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    from ilnrun import numeric_env
    from ilnrun.estimators import make_estimator

    c = loaded.cell(loaded.runs.loc[loaded.runs["method"] == "nystroem_ridge", "cell_id"].iloc[0])
    est = clone(c.estimator())
    cls = type(est)
    seen: list = []
    for name in ("_pass", "_predict_scaled"):
        real = getattr(cls, name)

        def spy(self, *args, _real=real):
            seen.append(numeric_env.blas_threads())
            return _real(self, *args)

        monkeypatch.setattr(cls, name, spy)
    with threadpool_limits(limits=2, user_api="blas"):
        session = numeric_env.blas_threads()
        est.fit(c.X_train, c.y_train)
        est.predict(c.X_test)
        est.score(c.X_test, c.y_test)
        assert seen == [1, 1, 1]
        plain = make_estimator("nystroem_ridge", c.setting, "fourier", size=c.size)
        plain.fit(c.X_train, c.y_train)
        assert seen[-1] == session


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


# Data big enough that OpenBLAS splits `y = X a` (1 550 x 400) and the kernel products over its
# threads: in a session allowing 2 BLAS threads, the old load() refused the 6 cells of
# repetition 2 (their splits, rebuilt unpinned, gave another test_loss_zero in the 17th digit)
# and the estimators of Nyström, kernel ridge, Doubly SGD and kernel OGD missed their rows'
# test losses by ~1e-16 relative (OpenBLAS 0.3.30 / 0.3.31, SkylakeX kernels); pinned as the
# command line pins, none differs.
THREADED = tiny_config(
    seed=1,
    repetitions=3,
    **{
        "dataset.D": 400,
        "dataset.T": 30,
        "dataset.n_val": 20,
        "dataset.n_test": 1500,
        "feature_map": {"kind": "fourier"},
        "evaluation": {"m_test": 10, "curve_points": 5, "n_test_estimated": 20},
        "methods": {
            "shrinking_gradient": {"eta": 0.3, "schedule": "constant", "B": 1.0},
            "doubly_sgd": {"eta": 0.3, "schedule": "constant", "nu": 0.0},
            "fixed_random": {"eta": 0.3, "schedule": "inv_sqrt"},
            "kernel_ogd": {"eta": 0.3, "schedule": "constant"},
            "kernel_ridge": {"ridge": 0.01},
            "nystroem_ridge": {"rank": 20, "ridge": 0.01},
        },
    },
)

# A plain Python session: BLAS left to its own threads (at least 2), every cell loaded, every
# learner's row reproduced by its estimator; prints what did not come back.
SESSION = """
import json, sys
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
import ilnrun

threadpool_limits(limits=2, user_api="blas")  # what a session on 2 cores gets by default
threads = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
res = ilnrun.load(sys.argv[1])
bad = []
for cell_id in res.runs["cell_id"]:
    try:
        c = res.cell(cell_id)
    except ilnrun.LoadError as exc:
        bad.append(["load", cell_id, str(exc)[:300]])
        continue
    est = c.estimator().fit(c.X_train, c.y_train)
    row = c.row
    test = float(0.5 * np.mean((est.predict(c.X_test) - c.y_test) ** 2))
    if float(np.mean(est.online_losses_)) != row["online_loss"] or test != row["test_loss"]:
        bad.append(["estimator", c.method, test, row["test_loss"]])
    diff = c.differences(est)
    if diff:
        bad.append(["row", c.method, sorted(diff)])
print(json.dumps({"threads": threads, "bad": bad, "cells": len(res.runs)}))
"""


def test_a_plain_session_reproduces_every_cell_of_the_command_line(tmp_path):
    """A run made by the command line (one BLAS thread per cell), read back in a plain Python
    session whose BLAS runs 2 threads (OPENBLAS_NUM_THREADS and the like unset): every cell
    loads, and every learner's estimator gives its row bit for bit — load() and the estimator
    pin the native thread pools as the command line does."""
    import os
    import subprocess
    import sys

    path = write_config(tmp_path / "threaded.yaml", THREADED)
    out = tmp_path / "results"
    r = invoke(["run", path, "--out", out, "-q"])
    assert r.exit_code == 0, r.output
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(ilnrun.__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
    )
    proc = subprocess.run(
        [sys.executable, "-c", SESSION, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert min(got["threads"]) >= 2, got["threads"]  # the session really runs 2 BLAS threads
    assert got["cells"] == 3 * 6
    assert got["bad"] == []


def test_a_runs_table_without_cell_ids_is_refused(run_dir, tmp_path):
    d = _copy(run_dir, tmp_path)
    runs = d / "runs.csv"
    runs.write_text(runs.read_text().replace("cell_id", "cellid", 1))
    with pytest.raises(LoadError, match="no cell_id column"):
        ilnrun.load(d)


def test_the_estimator_of_a_cell_takes_another_seed(loaded):
    """``estimator(random_state=...)`` overrides the cell's seed like any other parameter."""
    c = loaded.cell(loaded.runs.cell_id[0])
    est = c.estimator(random_state=3)
    assert est.random_state == 3
    assert isinstance(c.estimator().random_state, np.random.SeedSequence)
