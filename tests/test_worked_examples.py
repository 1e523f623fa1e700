"""docs/architecture.md §4–§6, tried from scratch: a toy learner (tests/toy_learner.py), a toy
feature map (tests/toy_feature_map.py) and a toy dataset (tests/toy_dataset.py), each registered
with one line and taken through every command — validate → run → plot → report — then the
estimators, the round trip of ``ilnrun.load`` and the jax engine (used, or refused clearly)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import toy_dataset
import toy_feature_map
import toy_learner
from conftest import invoke, tiny_config, write_config

import ilnrun
import ilnrun.estimators as E
from ilnrun.datasets import DATASETS
from ilnrun.engines import jax_available
from ilnrun.features import FEATURE_MAPS
from ilnrun.learners import LEARNERS


def _through_every_command(cfg: dict, tmp_path: Path, name: str) -> tuple[Path, str]:
    """validate, run, plot, report: every command exits 0; returns the results directory and
    the report's text."""
    path = write_config(tmp_path / f"{name}.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    out = tmp_path / name
    run = invoke(["run", path, "--out", out, "-q"])
    assert run.exit_code == 0, run.output
    plot = invoke(["plot", out, "--format", "png"])
    assert plot.exit_code == 0, plot.output
    assert (out / "figure1.png").is_file()
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    return out, (out / "REPORT.md").read_text()


def _round_trip(out: Path, method: str) -> ilnrun.roundtrip.LoadedCell:
    """One cell of ``method`` loaded back and reproduced bit for bit by its estimator."""
    res = ilnrun.load(out)
    cell = res.cell(res.runs.loc[res.runs["method"] == method, "cell_id"].iloc[-1])
    est = cell.estimator().fit(cell.X_train, cell.y_train)
    assert float(np.mean(est.online_losses_)) == cell.row["online_loss"]
    assert cell.differences(est) == {}
    return cell


# ----------------------------------------------------------------------------------------------
# §4 a learner: one module, one registry line


def test_worked_example_learner(monkeypatch, tmp_path):
    monkeypatch.setitem(LEARNERS, toy_learner.SPEC.name, toy_learner.SPEC)  # the MODULES line
    cfg = tiny_config(repetitions=2, **{"dataset.D": 12})
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "toy_avg": {"eta": [0.3, 1.0], "tail": 0.5},
    }
    out, text = _through_every_command(cfg, tmp_path, "learner")
    assert "Toy averaged SGD" in text and "q (TOY)" in text
    cell = _round_trip(out, "toy_avg")
    assert cell.size == cell.row["q"] > 0
    # its estimator, with its own parameter, on any data
    est = E.estimator_class("toy_avg")(5, tail=0.25, feature_map="relu", random_state=0)
    assert np.all(np.isfinite(est.fit(cell.X_train, cell.y_train).predict(cell.X_test)))
    # the jax engine: a learner without a jax pass runs its numpy fit there (§8), the same
    # numbers as the numpy engine's
    if not jax_available():
        pytest.skip("jax not installed")
    cfg["methods"] = {"toy_avg": {"eta": 0.3}}
    path = write_config(tmp_path / "jax.yaml", cfg)
    for engine in ("numpy", "jax"):
        r = invoke(["run", path, "--out", tmp_path / engine, "--engine", engine, "-q"])
        assert r.exit_code == 0, r.output
    a, b = (pd.read_csv(tmp_path / e / "runs.csv") for e in ("numpy", "jax"))
    assert (b["engine"] == "jax").all()
    same = ["online_loss", "val_loss", "test_loss", "train_evals"]
    pd.testing.assert_frame_equal(a[same], b[same])
    _round_trip(tmp_path / "jax", "toy_avg")  # no jax pass ran: reproduced bit for bit


# ----------------------------------------------------------------------------------------------
# §5 a feature map: one class, one registry line


def test_worked_example_feature_map(monkeypatch, tmp_path):
    cls = toy_feature_map.ToySign
    monkeypatch.setitem(FEATURE_MAPS, cls.name, cls)  # the FEATURE_MAPS line
    # its kernel is E_w[psi psi'] (Monte Carlo, within 5 standard errors)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 3))
    fmap = cls(3, gain=1.5)
    Psi = fmap.matrix(X, fmap.sample(rng, 200_000))
    prods = Psi[:, None, :] * Psi[None, :, :]
    se = prods.std(axis=2) / np.sqrt(prods.shape[2])
    # (+1e-6: arccos at cos = 1 - 1e-16 is 1.5e-8, the diagonal of the closed form is off by
    # 2e-8 while its Monte-Carlo standard error is 0)
    assert np.all(np.abs(prods.mean(axis=2) - fmap.kernel(X, X)) <= 5 * se + 1e-6)

    cfg = tiny_config(repetitions=2, **{"dataset.D": 12})
    cfg["feature_map"] = {"kind": cls.name, "gain": 0.5}
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "kernel_ogd": {"eta": [0.3, 1.0]},
        "kernel_ridge": {"ridge": [0.01]},
    }
    out, text = _through_every_command(cfg, tmp_path, "fmap")
    assert cls.choices in text  # the report says which features were used
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["fmap_gain"] == 0.5).all()
    for method in cfg["methods"]:
        cell = _round_trip(out, method)
        assert cell.feature_map.gain == 0.5
    # the estimators: a class built after the map takes its parameter
    est = E.estimator_class("kernel_ogd")(feature_map=cls.name, gain=0.5, eta=0.3, random_state=0)
    est.fit(cell.X_train, cell.y_train)
    assert type(est.feature_map_) is cls and est.feature_map_.gain == 0.5
    # the jax engine: refused at validation, exit 2, naming the key and the maps that can
    path = write_config(tmp_path / "jax.yaml", cfg)
    r = invoke(["run", path, "--out", tmp_path / "jax", "--engine", "jax", "-q"])
    assert r.exit_code == 2
    assert "feature_map.kind" in r.output and "toy_sign' has no jax twin" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "jax").exists()


# ----------------------------------------------------------------------------------------------
# §6 a dataset: one module, one registry line


def test_worked_example_dataset(monkeypatch, tmp_path):
    spec = toy_dataset.SPEC
    monkeypatch.setitem(DATASETS, spec.name, spec)  # the DATASETS line
    cfg = tiny_config(repetitions=2)
    cfg["dataset"] = {"kind": spec.name, "D": 3, "T": [20, 40], "n_val": 20, "n_test": 30}
    cfg["feature_map"] = {"kind": "fourier"}
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "fixed_random": {"eta": [0.3, 1.0]},
        "kernel_ogd": {"eta": 0.3},
    }
    out, text = _through_every_command(cfg, tmp_path, "dataset")
    assert spec.choices[0] in text
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["T"].unique()) == [20, 40] and "freq" in runs
    cell = _round_trip(out, "fixed_random")
    assert cell.X_train.shape == (cell.data_setting["T"], 3)
    assert np.all(np.abs(cell.X_train) <= 1.0)
    # the estimators on its splits (any learner)
    est = E.KernelRidgeRegressor(feature_map="fourier", ridge=0.01).fit(cell.X_train, cell.y_train)
    assert np.all(np.isfinite(est.predict(cell.X_test)))
    # the jax engine needs nothing of a dataset: validated and run there
    if not jax_available():
        pytest.skip("jax not installed")
    cfg["dataset"]["T"] = 20
    cfg["repetitions"] = 1
    cfg["methods"] = {"fixed_random": {"eta": 0.3}}
    path = write_config(tmp_path / "jax.yaml", cfg)
    r = invoke(["run", path, "--out", tmp_path / "jax", "--engine", "jax", "-q"])
    assert r.exit_code == 0, r.output
    jax_runs = pd.read_csv(tmp_path / "jax" / "runs.csv")
    assert (jax_runs["engine"] == "jax").all() and np.isfinite(jax_runs["test_loss"]).all()
