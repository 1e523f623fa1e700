"""How far the whole config reaches (docs/architecture.md §2, "The typed config"; §9, floors).

Below the top floor (``cli``, ``api``, the figures and the report) a function takes the typed
part it uses (``BudgetConfig``, ``EvaluationConfig``, ``LimitsConfig``, a dataset setting, the
cost model's ``Workload``), not the config mapping. What may still take the whole config is
listed here with its reason, so that a new function that does fails this test:

- the resolver itself (``config/schema.py``, ``config/keys.py``) builds the resolved mapping
  (it writes ``data_used`` and ``inputs`` into it while it validates);
- the grid (``config/grid.py``) expands the whole config into cells and keys;
- a resume compares whole configs, stored and new, in their dict form (``experiment.py``,
  ``datasets/identity.py``).

The cost model lives in ``ilnrun/cost.py``, outside ``config/``, and reads the config once
(``Workload.of``); every other of its functions takes the workload or a typed part.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_import_graph import RANK, floor, module_name

PKG = Path(__file__).resolve().parent.parent / "ilnrun"

# module -> the functions that take the whole config as ``cfg`` (and why: the module docstring)
WHOLE_CONFIG = {
    "config.schema": {
        "engine_of",
        "dump",
        "data_lines",
        "_resolve_paths",
        "_cross_checks",
        "_budget_sizes",
        "_engine_checks",
        "_dataset_checks",
        "_feature_map_checks",
        "_resource_checks",
        "_count_cells",
    },
    "config.keys": {"add_select_on", "add_evaluation_keys", "check_protocol", "add_losses"},
    "config.grid": {"_files_by_content", "axes", "dataset_settings", "data_identity"},
    "experiment": {
        "_numbers_part",
        "prepare_dir",
        "check_same_data",
        "config_changes",
        "_check_same_config",
        "_run_locked",
        "run",
    },
    "datasets.identity": {"by_content"},
}
# where the mapping being resolved is annotated ``dict`` (it is written to)
RAW_DICT_MODULES = {"config.schema", "config.keys", "datasets.identity"}


def _cfg_parameters() -> list[tuple[str, str, str | None]]:
    """``(module, function, annotation)`` of every parameter named ``cfg`` below the top
    floor."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        mod = module_name(path)
        if RANK[floor(mod)] >= RANK["top"]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
                    if arg.arg == "cfg":
                        ann = ast.unparse(arg.annotation) if arg.annotation else None
                        out.append((mod, node.name, ann))
    return out


def test_below_the_top_floor_only_the_listed_functions_take_the_whole_config():
    found = {(m, f) for m, f, _ in _cfg_parameters()}
    allowed = {(m, f) for m, fs in WHOLE_CONFIG.items() for f in fs}
    assert found - allowed == set(), "take the typed part instead (config/typed.py)"


def test_every_cfg_parameter_below_the_top_floor_is_annotated():
    bare = [(m, f) for m, f, ann in _cfg_parameters() if ann is None]
    assert bare == []


def test_a_plain_dict_config_only_where_the_mapping_is_built():
    """Elsewhere the config is an ``Experiment`` or, read only, a ``Mapping``."""
    plain = [
        (m, f, ann)
        for m, f, ann in _cfg_parameters()
        if ann is not None and ann.split("[")[0] == "dict" and m not in RAW_DICT_MODULES
    ]
    assert plain == []


def test_the_cost_model_is_outside_config_and_takes_a_workload():
    assert not (PKG / "config" / "resources.py").exists()
    assert floor("cost") == "config"
    tree = ast.parse((PKG / "cost.py").read_text(encoding="utf-8"))
    takes_config = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                ann = ast.unparse(arg.annotation) if arg.annotation else ""
                if arg.arg in ("cfg", "config") or "Experiment" in ann:
                    takes_config.append(node.name)
    assert takes_config == ["of"]  # Workload.of: the one walk of the config


def test_the_checker_sees_a_function_that_takes_the_config(tmp_path, monkeypatch):
    """A module below the top floor with ``def f(cfg: dict)`` is found (the test can fail)."""
    import test_config_reach as me

    fake = tmp_path / "ilnrun"
    (fake / "engines").mkdir(parents=True)
    (fake / "engines" / "x.py").write_text("def f(cfg: dict, n):\n    return cfg['a']\n")
    (fake / "cli.py").write_text("def g(cfg):\n    pass\n")
    monkeypatch.setattr(me, "PKG", fake)
    import test_import_graph

    monkeypatch.setattr(test_import_graph, "PKG", fake)
    assert me._cfg_parameters() == [("engines.x", "f", "dict")]
