"""The three worked examples of docs/architecture.md §4–§6 registered together (``toy_plugins``)
and one tiny config that uses all three — the toy dataset, the toy feature map, the toy learner
beside built-in ones — taken through ``ilnrun validate``, ``run`` and ``report``. Always on;
``make test-plugins`` runs the plugin-contract tests with the toys registered for the whole run."""

from __future__ import annotations

import pandas as pd
import toy_plugins
from conftest import invoke, tiny_config, write_config


def test_a_toy_learner_map_and_dataset_together_through_validate_run_report(monkeypatch, tmp_path):
    toy_plugins.register(monkeypatch.setitem)
    cfg = tiny_config(repetitions=2)
    cfg["dataset"] = {"kind": toy_plugins.DATASET.name, "D": 3, "T": 20, "n_val": 10, "n_test": 15}
    cfg["feature_map"] = {"kind": toy_plugins.FEATURE_MAP.name, "gain": 0.5}
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "kernel_ogd": {"eta": 0.3},
        toy_plugins.LEARNER.name: {"eta": [0.3, 1.0]},
    }
    path = write_config(tmp_path / "toys.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    assert toy_plugins.LEARNER.name in val.output
    out = tmp_path / "results"
    run = invoke(["run", path, "--out", out, "--jobs", "1", "-q"])
    assert run.exit_code == 0, run.output
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["method"]) == set(cfg["methods"])
    assert len(runs) == 2 * (2 + 1 + 2) and not runs["diverged"].any()
    assert (runs["fmap_gain"] == 0.5).all() and runs["q"].notna().any()
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    text = (out / "REPORT.md").read_text()
    assert toy_plugins.LEARNER.label in text
    assert toy_plugins.FEATURE_MAP.choices in text
    assert toy_plugins.DATASET.choices[0] in text
