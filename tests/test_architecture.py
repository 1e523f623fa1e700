"""The architecture's promises: each learner, feature map and dataset is described in one place
that every stage reads, and a cell's identity depends only on the resolved config."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import toy_learner
from conftest import invoke, tiny_config, write_config

from ilnrun import config as C
from ilnrun import plots
from ilnrun.datasets import DATASETS
from ilnrun.features import FEATURE_MAPS
from ilnrun.learners import LEARNERS
from ilnrun.params import NEVER

PACKAGE = Path(__file__).resolve().parent.parent / "ilnrun"


def _string_literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    }


@pytest.mark.parametrize(
    ("names", "home"),
    [
        (set(LEARNERS), "learners"),
        (set(FEATURE_MAPS), "features.py"),
        (set(DATASETS), "datasets"),
    ],
    ids=["learners", "feature maps", "datasets"],
)
def test_no_module_names_a_plugin_outside_its_home(names, home):
    """Outside its own module(s), no module of ilnrun/ names a learner, a feature map or a
    dataset in a string literal: every stage reads the specs."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == home or rel.startswith(home + "/"):
            continue
        found = _string_literals(path) & names
        offenders += [f"{rel}: {sorted(found)}"] if found else []
    assert offenders == []


@pytest.fixture
def toy_registered(monkeypatch):
    """The toy learner registered with one line, as a contributor would add it to MODULES."""
    monkeypatch.setitem(LEARNERS, toy_learner.SPEC.name, toy_learner.SPEC)
    return toy_learner.SPEC


def test_a_new_learner_appears_in_every_output(toy_registered, tmp_path):
    """One new module + one registry line: the toy learner (with a new kind of budget size)
    is validated, run, counted, tabulated, drawn and reported without editing any other file."""
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 3})
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "toy_avg": {"eta": [0.3, 1.0], "tail": 0.5},
        "kernel_ogd": {"eta": 1.0},
    }
    path = write_config(tmp_path / "toy.yaml", cfg)
    listing = invoke(["list"])
    assert "toy_avg" in listing.output and "budget size q" in listing.output
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    assert "q=" in val.output  # its derived size
    out = tmp_path / "results"
    res = invoke(["run", path, "--out", out, "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "runs.csv")
    toy = runs[runs["method"] == "toy_avg"]
    assert len(toy) == 3 * 2 and (toy["q"] > 0).all()
    assert (toy["train_evals"] == toy["q"] * 30).all()  # counted, equal to the spec's formula
    assert "tail" in runs and (toy["tail"] == 0.5).all()
    summary = pd.read_csv(out / "summary.csv")
    assert (summary["method"] == "toy_avg").sum() == 1
    assert invoke(["plot", out, "--format", "png"]).exit_code == 0
    data = plots._Data.load(out)
    fig = plots._figure1(data)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert toy_registered.label in legend
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    text = (out / "REPORT.md").read_text()
    assert f"{toy_registered.label} |" in text or f"| {toy_registered.label}" in text
    assert "SG < Toy averaged SGD" in text  # the proposed learner compared with it
    assert "q (TOY)" in text  # its size in the setup's budget table


# ----------------------------------------------------------------------------------------------
# cell identity


def test_todays_cell_ids_are_kept():
    """Golden ids of configs/figure1.yaml, computed by the code before the specs existed: the
    seeds of every committed experiment are unchanged (the first and last of its 9 600 cells
    then; its grids have grown since, and the old cells are kept among the new)."""
    ids = {c.id for c in C.cells(C.load(PACKAGE.parent / "configs" / "figure1.yaml"))}
    assert len(ids) >= 9600
    assert {"ed9e25d2ece3ea03369c", "3628d4e9fb22e4658e59"} <= ids


def _with_default(monkeypatch, method: str, key: str, value) -> None:
    spec = LEARNERS[method]
    params = tuple(
        dataclasses.replace(p, default=value) if p.name == key else p for p in spec.params
    )
    monkeypatch.setitem(LEARNERS, method, dataclasses.replace(spec, params=params))


def test_changing_a_default_keeps_cells_and_resume_correct(monkeypatch, tmp_path):
    """The reproduced defect: eta [0.1, 0.3] run, the default changed from 0.1 to 0.3, the same
    config rerun into the same directory. Cell ids do not move, the resume adds nothing and
    runs.csv still holds one row per (eta, repetition, ...)."""
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 2})
    cfg["methods"] = {"shrinking_gradient": {"eta": [0.1, 0.3]}}
    path = write_config(tmp_path / "eta.yaml", cfg)
    out = tmp_path / "results"
    ids = [c.id for c in C.cells(C.load(path))]
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    before = pd.read_csv(out / "runs.csv")
    _with_default(monkeypatch, "shrinking_gradient", "eta", 0.3)
    assert [c.id for c in C.cells(C.load(path))] == ids
    res = invoke(["run", path, "--out", out])
    assert res.exit_code == 0 and "4 cells, 4 already done (resuming)" in res.output
    after = pd.read_csv(out / "runs.csv")
    pd.testing.assert_frame_equal(before, after)
    assert sorted(after["eta"]) == [0.1, 0.1, 0.3, 0.3]


def test_a_config_relying_on_a_changed_default_is_refused(monkeypatch, tmp_path):
    """A config that leaves eta to its default resolves differently once the default changes:
    the resume is refused with the differing key named."""
    cfg = tiny_config(**{"dataset.D": 20, "repetitions": 1})
    cfg["methods"] = {"fixed_random": {"schedule": "constant"}}
    path = write_config(tmp_path / "default.yaml", cfg)
    out = tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    _with_default(monkeypatch, "fixed_random", "eta", 0.3)
    res = invoke(["run", path, "--out", out, "-q"])
    assert res.exit_code == 2
    assert "methods.fixed_random.eta" in res.output and "--fresh" in res.output


def test_key_omit_is_frozen_not_the_default():
    """Every learner parameter carries an explicit frozen key_omit (its default when it was
    introduced); changing a default never changes it."""
    for spec in LEARNERS.values():
        for p in spec.params:
            assert p.key_omit is not NEVER, (spec.name, p.name)
            changed = dataclasses.replace(p, default="something else")
            assert changed.key_omit == p.key_omit
