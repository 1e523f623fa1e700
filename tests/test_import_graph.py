"""The import graph of ``ilnrun/`` (docs/architecture.md §7): no circle, no arrow up.

Every module of the package is parsed (``ast``); every ``import`` / ``from ... import`` of an
ilnrun module counts, at the top of a module or inside a function (a lazy import is still a
dependency). Each module sits on a floor; a module may import modules of its own floor or below,
never above, and the graph must have no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ilnrun"

# Floors, lowest first. A module is on the floor of the longest prefix listed.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # pure helpers: parameters and validation, statistics, bounded YAML, step-size schedules,
    # batch-independent jax sums, the rate analysis (T reaching a target excess risk), the native
    # numeric libraries (their threads, the numeric environment)
    (
        "ground",
        (
            "params",
            "stats",
            "safe_yaml",
            "schedules",
            "jax_ops",
            "tempdirs",
            "estimator_checks",
            "rate",
            "threads",
            "numeric_env",
            "compiled_cache",
            "stopping",
        ),
    ),
    # the plugins and the science they share: feature maps, datasets, learners (and their jax
    # passes), losses, the exact-kernel theory, the matched budget
    ("plugins", ("features", "data", "datasets", "learners", "losses", "theory", "budget")),
    # validation, resolution, the grid of cells; the cost model (what a config's cells will
    # allocate and take), which validation refuses by and which reads the grid
    ("config", ("config", "cost")),
    ("cell", ("cell",)),  # what one cell is and computes
    ("engines", ("engines", "distributed")),  # how cells are executed
    ("experiment", ("experiment", "results", "readers", "pack")),  # the results directory
    (
        "top",
        (
            "api",
            "cli",
            "estimators",
            "overrides",
            "plots",
            "plotkit",
            "report",
            "roundtrip",
            "__init__",
        ),
    ),
)
RANK = {name: i for i, (name, _) in enumerate(FLOORS)}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def floor(mod: str) -> str:
    best, found = -1, None
    for name, prefixes in FLOORS:
        for pre in prefixes:
            if (mod == pre or mod.startswith(pre + ".")) and len(pre) > best:
                best, found = len(pre), name
    assert found is not None, f"module {mod!r} is on no floor: add it to FLOORS"
    return found


def imports(mod: str, path: Path, known: set[str]) -> set[str]:
    """The ilnrun modules ``mod`` imports (anywhere in the file), as module names."""
    is_pkg = path.name == "__init__.py"
    package = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if mod == "__init__":
        package = []
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name[len("ilnrun.") :] for a in node.names if a.name.startswith("ilnrun.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                base += node.module.split(".") if node.module else []
            elif node.module and (node.module == "ilnrun" or node.module.startswith("ilnrun.")):
                base = node.module.split(".")[1:]
            else:
                continue
            stem = ".".join(base)
            for a in node.names:  # ``from . import x`` may name a submodule
                sub = f"{stem}.{a.name}" if stem else a.name
                targets.append(sub if sub in known else stem)
        out.update(t for t in targets if t and t != mod)
    return {t if t in known else _owner(t, known) for t in out} - {None, mod}


def _owner(name: str, known: set[str]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(m, p, known) for m, p in mods.items()}


def test_every_module_is_on_a_floor(graph):
    for mod in graph:
        floor(mod)


def test_no_import_climbs_to_a_lower_floor(graph):
    """A module imports only modules of its own floor or below."""
    up = [
        f"{m} ({floor(m)}) imports {t} ({floor(t)})"
        for m, targets in graph.items()
        for t in sorted(targets)
        if RANK[floor(t)] > RANK[floor(m)]
    ]
    assert up == []


def test_no_import_cycle(graph):
    """Depth-first search for a back edge; a parent package's ``__init__`` imported by its own
    submodule (``from . import x`` inside the package) is a cycle too."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append([*stack[stack.index(t) :], t])
            elif t not in state:
                visit(t, [*stack, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The parser counts an import inside a function and resolves relative imports."""
    src = "def f():\n    from ..cell import finish\n    from . import jax_runner\n"
    p = tmp_path / "engines" / "x.py"
    p.parent.mkdir()
    p.write_text(src)
    known = {"cell", "engines", "engines.jax_runner", "engines.x"}
    assert imports("engines.x", p, known) == {"cell", "engines.jax_runner"}
