"""Trust at the edges the config layer owns: names, long values, sizes that cannot run here,
data paths and files that belong to the config, and data a feature map cannot work with. Every
case ends in exit 2 naming the key, before any work, without a traceback."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest import WORK, bounded_work, invoke, refused, tiny_config, write_config

from ilnrun import config as C


@pytest.mark.parametrize(
    "name",
    ["a" * 101, "bad\x1b[31mname", "nul\x00byte", "tab\there", "../up", ".hidden", "a/b", ""],
    ids=["too long", "escape", "nul", "tab", "parent", "hidden", "slash", "empty"],
)
def test_unusable_names_exit_2(tmp_path, name):
    path = write_config(tmp_path / "c.yaml", tiny_config(name=name))
    for cmd in ("validate", "run"):
        res = invoke([cmd, path, *(["--out", tmp_path / "o"] if cmd == "run" else [])])
        refused(res, "name:")
        assert "\x1b" not in res.output and "\x00" not in res.output
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_huge_values_are_never_echoed_in_full(tmp_path):
    cfg = tiny_config(**{"methods.fixed_random.eta": "x" * 100_000})
    cfg["unknown_" + "k" * 5000] = 1
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, "methods.fixed_random.eta")
    assert len(res.output) < 2000


@pytest.mark.parametrize(
    ("change", "knob"),
    [
        ({"dataset.D": 1_000_000_000}, "limits.max_memory_gb"),
        ({"dataset.T": 100_000_000}, "limits.max_memory_gb"),
        ({"dataset.n_test": 1_000_000_000}, "limits.max_memory_gb"),
        ({"evaluation.m_test": 1_000_000_000_000}, "limits.max_memory_gb"),
        ({"budget.dsgd_k": 1_000_000_000}, "limits.max_memory_gb"),
        ({"repetitions": 1_000_000_000}, "limits.max_cells"),
        (
            {
                "dataset.D": list(range(10, 210)),
                "methods.fixed_random.eta": np.linspace(0.01, 1, 1000).tolist(),
            },
            "limits.max_cells",
        ),
        (
            {"methods.shrinking_gradient": {"preset": "theory", "B": 1000.0}},
            "limits.max_memory_gb",
        ),
    ],
    ids=["D", "T", "n_test", "m_test", "dsgd_k", "repetitions", "grid", "theory B"],
)
def test_what_cannot_run_here_is_refused_before_any_work(tmp_path, change, knob):
    path = write_config(tmp_path / "c.yaml", tiny_config(**change))
    with bounded_work(WORK):
        res = invoke(["run", path, "--out", tmp_path / "o"])
    refused(res, knob)
    assert not (tmp_path / "o" / "cells.jsonl").exists()


def test_limits_are_knobs(tmp_path):
    small = tiny_config(**{"limits": {"max_cells": 10}})
    refused(invoke(["validate", write_config(tmp_path / "a.yaml", small)]), "limits.max_cells")
    ok = tiny_config(**{"limits": {"max_cells": 10_000, "max_memory_gb": 1.0}})
    res = invoke(["validate", write_config(tmp_path / "b.yaml", ok)])
    assert res.exit_code == 0, res.output
    assert "largest cell" in res.output


def _table(path, rows: int = 80, seed: int = 0, zero: bool = False) -> None:
    rng = np.random.default_rng(seed)
    X = np.zeros((rows, 2)) if zero else rng.standard_normal((rows, 2))
    y = rng.standard_normal(rows)
    lines = ["u,v,y"] + [f"{a:.6f},{b:.6f},{c:.6f}" for (a, b), c in zip(X, y, strict=True)]
    path.write_text("\n".join(lines) + "\n")


def _file_config(path: str, **extra) -> dict:
    cfg = tiny_config()
    cfg["dataset"] = {"kind": "file", "path": path, "target": "y", "T": 30, "n_val": 20, **extra}
    return cfg


def test_relative_data_paths_are_relative_to_the_config(tmp_path, monkeypatch):
    (tmp_path / "project" / "data").mkdir(parents=True)
    _table(tmp_path / "project" / "data" / "t.csv")
    path = write_config(tmp_path / "project" / "c.yaml", _file_config("data/t.csv"))
    monkeypatch.chdir(tmp_path)  # not the config's folder
    cfg = C.load(path)
    assert cfg["dataset"]["path"] == str((tmp_path / "project" / "data" / "t.csv").resolve())
    (entry,) = cfg["inputs"].values()
    assert len(entry["sha256"]) == 64 and entry["bytes"] > 0
    (used,) = cfg["data_used"]
    assert used["rows"] == 80 and used["features"] == ["u", "v"] and used["target"] == "y"
    assert used["splits"] == {"train": 30, "val": 20, "test": 30}


def test_a_changed_data_file_is_a_changed_config(tmp_path):
    data = tmp_path / "t.csv"
    _table(data, seed=0)
    path = write_config(tmp_path / "c.yaml", _file_config("t.csv"))
    out = tmp_path / "results"
    first = [c.id for c in C.cells(C.load(path))]
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    _table(data, seed=1)  # same shape, other numbers
    assert [c.id for c in C.cells(C.load(path))] != first  # cells identified by content
    refused(invoke(["run", path, "--out", out, "-q"]), "inputs.", "sha256", "--fresh")
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert list(saved["inputs"].values())[0]["sha256"] != C.load(path)["inputs"]


def test_the_same_file_elsewhere_gives_the_same_cells(tmp_path):
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        _table(tmp_path / where / "t.csv")
        write_config(tmp_path / where / "c.yaml", _file_config("t.csv"))
    ids = [[c.id for c in C.cells(C.load(tmp_path / w / "c.yaml"))] for w in ("a", "b")]
    assert ids[0] == ids[1]


def test_a_list_of_features_is_one_value_not_an_axis(tmp_path):
    _table(tmp_path / "t.csv")
    cfg = C.load(write_config(tmp_path / "c.yaml", _file_config("t.csv", features=["v", "u"])))
    assert len(C.dataset_settings(cfg)) == 1
    assert cfg["data_used"][0]["features"] == ["v", "u"]


@pytest.mark.parametrize("sigma", ["median", 1e-12])
def test_data_that_make_the_feature_map_degenerate_exit_2(tmp_path, sigma):
    _table(tmp_path / "t.csv", zero=sigma == "median")
    cfg = _file_config("t.csv", standardize=False)
    cfg["feature_map"] = {"kind": "fourier", "sigma": sigma}
    cfg["methods"] = {"fixed_random": {"eta": 0.3}}
    path = write_config(tmp_path / "c.yaml", cfg)
    refused(invoke(["run", path, "--out", tmp_path / "o", "-q"]), "feature_map", "bandwidth")
