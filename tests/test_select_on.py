"""Selection without the kernel (``evaluation.select_on``, docs/protocol.md §5.2): the
Algorithm-2 validation loss, both selections side by side, and the configs and results
directories written before the key existed."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import invoke, tiny_config, write_config

from ilnrun.cell import seeds, validation_seed
from ilnrun.config import ConfigError, cells, record_digest, resolve
from ilnrun.results import read_manifest, select, write_manifest

# a tiny config with more validation points than n_test_estimated
SMALL = {"evaluation": {"m_test": 50, "n_test_estimated": 30, "curve_points": 10}}


def small(**changes) -> dict:
    cfg = tiny_config(**changes)
    cfg["evaluation"] = {**SMALL["evaluation"], **cfg["evaluation"]} | changes.get("evaluation", {})
    return cfg


def test_default_is_left_out_of_the_resolved_config_and_the_digest():
    plain = resolve(tiny_config())
    exact = resolve(tiny_config(**{"evaluation.select_on": "exact"}))
    est = resolve(tiny_config(**{"evaluation.select_on": "estimated"}))
    assert "select_on" not in plain.as_dict()["evaluation"]
    assert plain.as_dict() == exact.as_dict()
    assert est.as_dict()["evaluation"]["select_on"] == "estimated"
    # same cells, same record digests: select_on changes no number
    for a, b in zip(cells(plain), cells(est), strict=True):
        assert a.id == b.id
        assert record_digest(plain, a) == record_digest(est, b)


def test_mapping_form_and_its_errors():
    cfg = resolve(tiny_config(**{"evaluation.select_on": {"shrinking_gradient": "estimated"}}))
    assert cfg.evaluation.selects_on("shrinking_gradient", True) == "estimated"
    assert cfg.evaluation.selects_on("doubly_sgd", False) == "exact"
    with pytest.raises(ConfigError) as e:
        resolve(tiny_config(**{"evaluation.select_on": {"kernel_ogd": "estimated"}}))
    assert "evaluation.select_on.kernel_ogd" in str(e.value)
    with pytest.raises(ConfigError) as e:
        resolve(tiny_config(**{"evaluation.select_on": {"nope": "exact"}}))
    assert "evaluation.select_on.nope" in str(e.value)
    with pytest.raises(ConfigError) as e:
        resolve(tiny_config(**{"evaluation.select_on": "estimate"}))
    assert "did you mean 'estimated'" in str(e.value)


def test_bad_select_on_exits_2_naming_the_key(tmp_path):
    path = write_config(tmp_path / "c.yaml", tiny_config(**{"evaluation.select_on": 3}))
    res = invoke(["validate", path])
    assert res.exit_code == 2
    assert "evaluation.select_on" in res.output


def test_validation_seed_is_a_third_child_that_leaves_the_others():
    cfg = resolve(tiny_config())
    c = cells(cfg)[0]
    fit_ss, eval_ss = seeds(cfg.seed, c)
    third = validation_seed(cfg.seed, c)
    draws = [np.random.default_rng(s).random(3) for s in (fit_ss, eval_ss, third)]
    assert not np.allclose(draws[0], draws[2]) and not np.allclose(draws[1], draws[2])
    # the first two children are those of a two-way spawn
    again = seeds(cfg.seed, c)
    assert np.array_equal(np.random.default_rng(again[1]).random(3), draws[1])


def _runs(out):
    return pd.read_csv(out / "runs.csv")


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory):
    """The small config run on exact selection, then resumed with select_on: estimated."""
    base = tmp_path_factory.mktemp("select")
    exact_cfg = write_config(base / "exact.yaml", small())
    est_cfg = write_config(base / "est.yaml", small(**{"evaluation.select_on": "estimated"}))
    out = base / "results"
    r1 = invoke(["run", exact_cfg, "--out", out, "--jobs", "1", "-q"])
    assert r1.exit_code == 0, r1.output
    exact = _runs(out)
    exact_summary = pd.read_csv(out / "summary.csv")
    r2 = invoke(["run", est_cfg, "--out", out, "--jobs", "1", "-q"])
    return base, out, exact, exact_summary, r2


def test_val_loss_estimated_only_for_algorithm2_learners(both_ways):
    _, _, runs, _, _ = both_ways
    sg = runs[runs["method"] == "shrinking_gradient"]
    others = runs[runs["method"] != "shrinking_gradient"]
    assert sg["val_loss_estimated"].notna().all()
    assert others["val_loss_estimated"].isna().all()
    # an estimate of the loss, not a copy of it (Algorithm 2 adds its sampling variance)
    ok = sg[~sg["diverged"]]
    assert not np.allclose(ok["val_loss_estimated"], ok["val_loss"])
    assert (np.isfinite(ok["val_loss_estimated"]) & (ok["val_loss_estimated"] > 0)).all()


def test_resume_with_select_on_changes_only_the_selection(both_ways):
    _, out, exact, exact_summary, r2 = both_ways
    assert r2.exit_code == 0, r2.output
    est = _runs(out)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["cells_resumed"] == meta["cells"]  # nothing ran again
    drop = ["selected", "wall_s", "eval_s"]
    pd.testing.assert_frame_equal(exact.drop(columns=drop), est.drop(columns=drop))
    assert yaml.safe_load((out / "config.yaml").read_text())["evaluation"]["select_on"] == (
        "estimated"
    )
    # both selections are kept whatever the mode; `selected` follows the mode per learner
    for df in (exact, est):
        assert (df["selected_exact"] == exact["selected"]).all()
    sg = est["method"] == "shrinking_gradient"
    assert (est.loc[sg, "selected"] == est.loc[sg, "selected_estimated"]).all()
    assert (est.loc[~sg, "selected"] == exact.loc[~sg, "selected"]).all()
    summary = pd.read_csv(out / "summary.csv")
    row = summary[summary["method"] == "shrinking_gradient"].iloc[0]
    assert row["setting"] == row["sel_estimated_setting"]
    old = exact_summary[exact_summary["method"] == "shrinking_gradient"].iloc[0]
    assert old["setting"] == old["sel_exact_setting"]


def test_estimated_selection_picks_the_lowest_mean_estimated_val_loss(both_ways):
    _, out, _, _, _ = both_ways
    runs = _runs(out)
    for _, g in runs[runs["method"] == "shrinking_gradient"].groupby("D"):
        ok = g[~(g["diverged"] | g["timed_out"])]
        means = ok.groupby("setting")["val_loss_estimated"].mean()
        chosen = g.loc[g["selected_estimated"], "setting"].unique()
        assert list(chosen) == [means.idxmin()]


def test_report_shows_both_selections_and_says_which_it_uses(both_ways, tmp_path):
    _, out, _, _, _ = both_ways
    res = invoke(["report", out, "--out", tmp_path / "rep"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "## Selection with and without the kernel" in text
    assert "selected on Alg.-2 val loss" in text and "selected on exact val loss" in text
    assert "- Selection: Settings are selected on the exact validation loss, except" in text


def test_report_of_exact_selection_says_so(finished_run, tmp_path):
    _, results, _ = finished_run
    res = invoke(["report", results, "--out", tmp_path / "rep"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "- Selection: Settings are selected on the exact validation loss (" in text
    assert "(used)" in text  # the exact column is marked as the one the tables use


def test_old_results_without_the_column_resume_and_say_so(both_ways, tmp_path):
    """A results directory written before ``val_loss_estimated`` existed: its records lack the
    column, its config lacks select_on; it resumes without running a cell, and a report under
    ``select_on: estimated`` says the estimated selection needs a fresh run."""
    base, out, _, _, _ = both_ways
    old = tmp_path / "old"
    shutil.copytree(out, old)
    lines = []
    for line in (old / "cells.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["row"].pop("val_loss_estimated", None)
        rec.pop("values_sha256", None)  # nor did records carry a digest of their values
        lines.append(json.dumps(rec))
    (old / "cells.jsonl").write_text("\n".join(lines) + "\n")
    write_manifest(old, read_manifest(old))  # names only (no file digests), as it was then
    cfg = yaml.safe_load((old / "config.yaml").read_text())
    cfg["evaluation"].pop("select_on")
    (old / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = invoke(["run", base / "exact.yaml", "--out", old, "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    meta = json.loads((old / "meta.json").read_text())
    assert meta["cells_resumed"] == meta["cells"]
    runs = _runs(old)
    assert "selected_estimated" not in runs and runs["selected"].any()
    res = invoke(["run", base / "est.yaml", "--out", old, "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    runs = _runs(old)
    assert not runs.loc[runs["method"] == "shrinking_gradient", "selected"].any()
    rep = invoke(["report", old, "--out", tmp_path / "rep"])
    assert rep.exit_code == 0, rep.output
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "carry no Algorithm-2 validation loss" in text


def test_select_modes_ignore_estimated_without_the_loss():
    runs = pd.DataFrame(
        {
            "method": ["doubly_sgd"] * 4,
            "dsgd_k": [4] * 4,
            "setting": ["eta=1", "eta=1", "eta=2", "eta=2"],
            "repetition": [0, 1, 0, 1],
            "val_loss": [1.0, 1.0, 0.5, math.inf],
            "diverged": [False, False, False, True],
            "timed_out": [False] * 4,
            "cell_index": [0, 1, 2, 3],
        }
    )
    out = select(runs, [], {"doubly_sgd": "exact"})
    assert list(out["selected"]) == [True, True, False, False]


# ----------------------------------------------------------------------------------------------
# eta_scale: step sizes in units of 1/sqrt(T) (docs/protocol.md §5.3)


def test_eta_scale_formula_and_cell_keys():
    from ilnrun.cell import instance, plan
    from ilnrun.learners import LEARNERS

    plain = resolve(tiny_config())
    scaled = resolve(tiny_config(**{"methods.doubly_sgd.eta_scale": "sqrt_T"}))
    none = resolve(tiny_config(**{"methods.doubly_sgd.eta_scale": "none"}))
    assert "eta_scale" not in plain.as_dict()["methods"]["doubly_sgd"]
    assert none.as_dict() == plain.as_dict()  # the default is never stored
    assert scaled.as_dict()["methods"]["doubly_sgd"]["eta_scale"] == "sqrt_T"
    a, b = cells(plain), cells(scaled)
    for x, y in zip(a, b, strict=True):
        assert (x.id == y.id) == (x.method != "doubly_sgd")
    c = next(c for c in b if c.method == "doubly_sgd")
    p = plan(scaled.budget, c, instance(scaled.seed, scaled.feature_map, c))
    assert p.T == 30 and "eta_scale" not in p.args
    assert p.args["eta"] == c.hyper["eta"] / math.sqrt(30)
    # the spec-level formula, for every learner with eta
    for name, spec in LEARNERS.items():
        if any(q.name == "eta" for q in spec.params) and spec.arguments is None:
            args = spec.fit_arguments({"eta": 2.0, "eta_scale": "sqrt_T"}, None, 400)
            assert args["eta"] == pytest.approx(0.1), name


def test_eta_scale_is_refused_where_there_is_no_eta(tmp_path):
    cfg = tiny_config()
    cfg["methods"]["kernel_ridge"] = {"ridge": [0.1], "eta_scale": "sqrt_T"}
    path = write_config(tmp_path / "c.yaml", cfg)
    res = invoke(["validate", path])
    assert res.exit_code == 2 and "methods.kernel_ridge.eta_scale" in res.output
    bad = write_config(
        tmp_path / "d.yaml", tiny_config(**{"methods.doubly_sgd.eta_scale": "sqrtT"})
    )
    res = invoke(["validate", bad])
    assert res.exit_code == 2 and "methods.doubly_sgd.eta_scale" in res.output


def test_eta_scale_through_the_cli_and_per_T_edge_flags(tmp_path):
    cfg = tiny_config(**{"dataset.D": 20, "dataset.T": [20, 80], "repetitions": 2})
    cfg["methods"] = {
        # steps so small that the largest is best at every T: an edge at both
        "doubly_sgd": {"eta": [0.001, 0.002, 0.004], "eta_scale": "sqrt_T", "nu": 0.0},
    }
    path = write_config(tmp_path / "c.yaml", cfg)
    out = tmp_path / "res"
    res = invoke(["run", path, "--out", out, "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    runs = _runs(out)
    for _, r in runs.iterrows():
        written = float(setting_of(r["setting"])["eta"])
        assert r["eta"] == pytest.approx(written / math.sqrt(r["T"]))
        assert "eta_scale=sqrt_T" in r["setting"]
    rep = invoke(["report", out, "--out", tmp_path / "rep"])
    assert rep.exit_code == 0, rep.output
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "eta in units of 1/√T" in text
    summary = pd.read_csv(out / "summary.csv")
    assert [float(setting_of(s)["eta"]) for s in summary["setting"]] == [0.004, 0.004]
    # the flag names the T at which the edge was selected, in the table and the headline
    assert text.count("eta=0.004 (largest of the grid) at T = 20, 80") == 2


def setting_of(setting: str) -> dict:
    from ilnrun.report.data import setting_values

    return setting_values(setting)
