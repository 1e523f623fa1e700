"""Grid edges (docs/protocol.md §5.1): ``methods.<learner>.edges_ok`` says why a selection at the
edge of a parameter's grid is acceptable; it is checked by the schema, never part of a setting,
a cell id or a resume comparison, and the report names it beside the edge. Every committed
experiment's selections at a grid edge must be named in its config's ``edges_ok``."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
from conftest import invoke, refused, tiny_config, write_config

from ilnrun.config import cells, resolve
from ilnrun.config.keys import EDGES_OK
from ilnrun.experiment import config_changes
from ilnrun.readers import SUMMARY_COLUMNS, read_config, read_table
from ilnrun.report.data import ReportData, grid_edges, x_axis
from ilnrun.report.sections.selected import edge_text

REPO = Path(__file__).resolve().parents[1]
COMMITTED = sorted(
    p for p in (REPO / "experiments").rglob("results") if (p / "config.yaml").is_file()
)


def _with_edges_ok(cfg: dict, reason: str = "the largest step diverges") -> dict:
    """``cfg`` with an ``edges_ok`` reason for the first parameter of every learner."""
    out = copy.deepcopy(cfg)
    for section in out["methods"].values():
        param = next(k for k in section if k not in ("eta_scale", EDGES_OK))
        section[EDGES_OK] = {param: reason}
    return out


def test_edges_ok_is_kept_only_when_given_and_changes_no_cell_id_nor_resume():
    """On a committed experiment's resolved config: the same cell ids as its runs.csv with and
    without ``edges_ok``, which the resolved config carries only when given."""
    folder = REPO / "experiments" / "scaling" / "results"
    raw = read_config(folder)
    for section in raw["methods"].values():
        section.pop(EDGES_OK, None)  # the committed config's own reasons, if any
    plain, given = resolve(copy.deepcopy(raw)), resolve(_with_edges_ok(raw))
    assert all(EDGES_OK not in s for s in plain["methods"].values())
    assert given["methods"]["doubly_sgd"][EDGES_OK] == {"eta": "the largest step diverges"}
    committed = set(read_table(folder, "runs.csv", ("cell_id",))["cell_id"])
    assert {c.id for c in cells(plain)} == {c.id for c in cells(given)} == committed
    assert config_changes(plain.as_dict(), given.as_dict()) == ""  # a resume needs no --extend


@pytest.mark.parametrize(
    "bad, words",
    [
        (["eta"], ["methods.doubly_sgd.edges_ok", "must be a mapping"]),
        ({"etaa": "why"}, ["methods.doubly_sgd.edges_ok.etaa", "did you mean 'eta'"]),
        ({"eta": ""}, ["methods.doubly_sgd.edges_ok.eta", "non-empty reason"]),
        ({"eta": 3}, ["methods.doubly_sgd.edges_ok.eta", "non-empty reason"]),
    ],
)
def test_a_bad_edges_ok_exits_2_naming_the_key(tmp_path, bad, words):
    cfg = tiny_config()
    cfg["methods"]["doubly_sgd"][EDGES_OK] = bad
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, *words)


def _report_stub(edges_ok: dict | None) -> ReportData:
    r = object.__new__(ReportData)  # only the attributes the edge flags read
    section = {"eta": [0.1, 0.3, 1.0], "schedule": ["constant", "inv_sqrt"]}
    r.cfg = {"methods": {"m": section | ({EDGES_OK: edges_ok} if edges_ok else {})}}
    r.compared, r.xa = ["m"], "T"
    r.summary = pd.DataFrame(
        {
            "method": ["m"] * 3,
            "dsgd_k": [1, 1, 1],
            "T": [100, 200, 400],
            "setting": ["eta=1.0,schedule=constant", "eta=0.3,schedule=constant", "eta=1.0,"
                        "schedule=inv_sqrt"],
        }
    )  # fmt: skip
    return r


def test_the_report_names_the_reason_beside_the_edge():
    plain = edge_text(_report_stub(None), "m", 1)
    assert plain == "eta=1 (largest of the grid) at T = 100, 400"
    given = edge_text(_report_stub({"eta": "larger steps diverge"}), "m", 1)
    assert given == plain + " (accepted by the config's `edges_ok`: larger steps diverge)"


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: str(p.parent.relative_to(REPO)))
def test_no_committed_selection_sits_at_an_unexplained_grid_edge(folder):
    """Every selected setting of a committed experiment (each learner, budget and dataset
    setting) lies inside its parameter's grid, or the config's ``edges_ok`` names the
    parameter."""
    cfg = read_config(folder)
    summary = read_table(folder, "summary.csv", SUMMARY_COLUMNS)
    summary = summary[summary["n"].fillna(0) > 0]  # a group where every setting diverged
    xa = x_axis(cfg)
    unexplained = []
    for method, section in cfg["methods"].items():
        ok = section.get(EDGES_OK) or {}
        rows = summary[summary["method"] == method]
        for k, group in rows.groupby("dsgd_k", dropna=False):
            for e in grid_edges(section, group, xa):
                if e.param not in ok:
                    at = f" at {xa} = {', '.join(map(str, dict.fromkeys(e.xs)))}" if xa else ""
                    budget = "" if pd.isna(k) else f" k = {int(k)}"
                    unexplained.append(f"{method}{budget}: {e.flag}{at}")
    assert not unexplained, f"{folder.parent.relative_to(REPO)}: " + "; ".join(unexplained)
