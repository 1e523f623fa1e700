"""``ilnrun validate``: the resolved config, derived budgets, cell count and estimates; every
problem of a config reported with its key path, exit 2."""

from __future__ import annotations

import pytest
from conftest import TINY_CELLS, invoke, tiny_config, write_config

_invoke = invoke


def test_validate_prints_cell_count(config_file):
    res = _invoke(["validate", config_file])
    assert res.exit_code == 0, res.output
    assert f"# cells: {TINY_CELLS}" in res.stdout
    assert "shrinking_gradient" in res.stdout
    b = 4 * 30 * 31 // 2
    assert f"target {b:,}" in res.stdout


def test_bad_config_exit_2_names_key_path(tmp_path):
    bad = tiny_config(**{"methods.shrinking_gradient.eta": [0.3, -0.1]})
    path = write_config(tmp_path / "bad.yaml", bad)
    for command in ("run", "validate"):
        args = [command, path] + (["--out", tmp_path / "r"] if command == "run" else [])
        res = _invoke(args)
        assert res.exit_code == 2, res.output
        assert "methods.shrinking_gradient.eta[1]" in res.output
        assert "-0.1" in res.output
        assert "Traceback" not in res.output
    assert not (tmp_path / "r").exists()  # nothing ran


def test_several_config_problems_reported_together(tmp_path):
    bad = tiny_config(
        **{
            "methods.doubly_sgd.nu": -1.0,
            "dataset.T": 1,
            "methods.fixed_random.schedule": "constnt",
        }
    )
    res = _invoke(["validate", write_config(tmp_path / "bad.yaml", bad)])
    assert res.exit_code == 2
    for path in ("methods.doubly_sgd.nu", "dataset.T", "methods.fixed_random.schedule"):
        assert path in res.output
    assert "Traceback" not in res.output


def test_missing_config_file_exit_2(tmp_path):
    res = _invoke(["run", tmp_path / "nope.yaml", "--out", tmp_path / "r"])
    assert res.exit_code == 2, res.output
    assert "nope.yaml" in res.output and "Traceback" not in res.output
    res = _invoke(["validate", tmp_path / "nope.yaml"])
    assert res.exit_code == 2


def _budget_lines_from_cells(cfg) -> list[str]:
    """The derived-budget lines of ``ilnrun validate`` from every cell, one by one: the budgets,
    learners and settings read from the cells (validate reads them from its estimates), the
    lines formed by validate's own ``_budget_lines``."""
    from ilnrun import config as C
    from ilnrun import cost
    from ilnrun.budget import derive
    from ilnrun.cli import _budget_lines
    from ilnrun.learners import LEARNERS

    cells = C.cells(cfg)
    work = cost.Workload.of(cfg)
    Ts = sorted({c.data["T"] for c in cells})
    budgeted = [m for m in LEARNERS if any(c.method == m and c.per_round for c in cells)]
    sizes_of: dict = {}
    for c in cells:
        T, n_val, n_test, _ = work.sizes_of(c.data)
        sizes_of.setdefault(T, n_val + n_test)
    lines = []
    for T in Ts:
        for k in sorted({c.per_round for c in cells if c.per_round is not None}):
            b = derive(cfg.budget.match, k, T, sizes_of.get(T, 0))
            # the settings from every cell, one by one (validate reads them from its estimates)
            seen: list = []
            for c in cells:
                if c.per_round == k and c.data["T"] == T and (c.method, c.hyper) not in seen:
                    seen.append((c.method, c.hyper))
            lines += _budget_lines(b, T, k, budgeted, seen)
    return lines


@pytest.mark.parametrize("match", ["evaluations", "samples", "total"])
def test_the_derived_budgets_are_those_of_every_cell(tmp_path, match):
    """``validate`` reads its derived budgets from the estimates (a learner setting once per
    budget), not from every cell: the lines are those that every cell, read one by one, gives,
    sizes derived for a batch included, at several T, budgets and validation sizes."""
    from ilnrun.overrides import load_config

    cfg = tiny_config(
        **{
            "repetitions": 3,
            "dataset.T": [30, 50],
            "dataset.n_val": [40, 20],
            "budget.dsgd_k": [2, 4],
            "budget.match": match,
            "methods.doubly_sgd.batch": [1, 4, 7],
            "methods.doubly_sgd.block": [None, 3],
        }
    )
    if match == "total":
        cfg["evaluation"] = {"m_test": "train", "kernel": "free", "curve_points": 10}
        cfg["methods"].pop("kernel_ogd", None)
    path = write_config(tmp_path / "c.yaml", cfg)
    res = _invoke(["validate", path])
    assert res.exit_code == 0, res.output
    printed = [line for line in res.stdout.splitlines() if line.startswith(("#   T=", "#     "))]
    expected = _budget_lines_from_cells(load_config(str(path), ()))
    assert any(line.startswith("#     k=") for line in expected)  # a batch's own size shown
    assert printed == expected


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_validate_makes_the_estimates_once(config_file, monkeypatch, jobs):
    """The config's estimates are made once: for the memory check when it is resolved, then
    read again for the lines ``validate`` prints (and the check of ``--jobs`` workers)."""
    from ilnrun import cost

    made = []
    real = cost._estimates
    monkeypatch.setattr(cost, "_LAST", [])
    monkeypatch.setattr(cost, "_estimates", lambda work: made.append(1) or real(work))
    res = _invoke(["validate", config_file, "--jobs", jobs])
    assert res.exit_code == 0, res.output
    assert len(made) == 1
