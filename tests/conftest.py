"""Shared fixtures and helpers for the ilnrun test suite."""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import toy_plugins
import yaml
from click.testing import CliRunner

from ilnrun.datasets import Dataset, clipped_gaussian

if toy_plugins.enabled():  # make test-plugins: the toys registered before any test is collected
    toy_plugins.register()

# A tiny experiment: 2 values of D x 2 repetitions x (4 learners x 2-point grids) = 32 cells.
TINY_CONFIG: dict = {
    "name": "tiny",
    "seed": 7,
    "repetitions": 2,
    "dataset": {
        "kind": "clipped_gaussian",
        "D": [20, 40],
        "T": 30,
        "n_val": 40,
        "n_test": 60,
        "sparsity": 3,
    },
    "feature_map": {"kind": "coordinate"},
    "budget": {"match": "evaluations", "dsgd_k": 4},
    "evaluation": {"m_test": 50, "curve_points": 10},
    "methods": {
        "shrinking_gradient": {"eta": [0.3, 1.0], "schedule": "constant", "B": 1.0},
        "doubly_sgd": {"eta": [0.3, 1.0], "schedule": "constant", "nu": 0.0},
        "fixed_random": {"eta": [0.3, 1.0], "schedule": "inv_sqrt"},
        "kernel_ogd": {"eta": [0.3, 1.0], "schedule": "constant"},
    },
}
TINY_CELLS = 2 * 2 * 4 * 2


@pytest.fixture(autouse=True)
def _notes_not_inherited(monkeypatch):
    """Each test starts without the record of notes already printed (ILNRUN_NOTED), which a
    run passes to its workers so that a note is printed once a run."""
    monkeypatch.delenv("ILNRUN_NOTED", raising=False)


def tiny_config(**changes) -> dict:
    """A deep copy of ``TINY_CONFIG``; ``changes`` maps dotted key paths to new values."""
    cfg = copy.deepcopy(TINY_CONFIG)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = cfg
        for p in parents:
            node = node[p]
        node[last] = value
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    """Write ``cfg`` as YAML to ``path`` and return the path."""
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """The tiny config written to ``tmp_path/tiny.yaml``."""
    return write_config(tmp_path / "tiny.yaml", tiny_config())


def make_data(seed: int = 0, D: int = 20, T: int = 30, n_val: int = 20, n_test: int = 50):
    """A small clipped-Gaussian dataset (the paper's Figure 1 data)."""
    return clipped_gaussian(
        np.random.default_rng(seed), D=D, T=T, n_val=n_val, n_test=n_test, sparsity=3
    )


@pytest.fixture
def small_data() -> Dataset:
    return make_data()


def invoke(args: list) -> object:
    """``ilnrun ARGS`` in-process (``click.testing.CliRunner``); paths may be ``Path``."""
    from ilnrun.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def run_and_report(tmp_path: Path, cfg: dict) -> str:
    """``ilnrun run`` ``cfg`` into ``tmp_path/results`` and ``ilnrun report`` it into
    ``tmp_path/report`` (both must exit 0); the report's text."""
    path = write_config(tmp_path / "config.yaml", cfg)
    out = tmp_path / "results"
    res = invoke(["run", path, "--out", out, "--jobs", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    res = invoke(["report", out, "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
    return (tmp_path / "report" / "REPORT.md").read_text()


def refused(res, *words: str) -> str:
    """A command refused as a user's mistake: exit status 2, no traceback, and each of
    ``words`` in what it printed (click's ``output`` holds stdout and stderr). Returns that."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for w in words:
        assert w in res.output, (w, res.output)
    return res.output


def read_meta(out: Path) -> dict:
    """``meta.json`` of the results directory ``out``."""
    return json.loads((Path(out) / "meta.json").read_text())


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> tuple[Path, Path, object]:
    """The tiny config run once with --jobs 1: (config path, results dir, CliRunner result)."""
    base = tmp_path_factory.mktemp("cli")
    cfg_path = write_config(base / "tiny.yaml", tiny_config())
    out = base / "results"
    result = invoke(["run", cfg_path, "--out", out, "--jobs", "1"])
    return cfg_path, out, result


# The Python calls allowed to refusing a hostile input (tests that use bounded_work): the
# refusals measured make 0.5–200 thousand calls (the most: a run refused for its grid, which
# plans its cells first); expanding an alias bomb or a deep nesting would make millions.
WORK = 1_000_000


class WorkExceeded(AssertionError):
    """More Python function calls than a :func:`bounded_work` block allows."""


@contextlib.contextmanager
def bounded_work(max_calls: int) -> Iterator[list[int]]:
    """Fail when the block makes more than ``max_calls`` Python function calls: a bound on the
    work done that, unlike a wall-clock limit, does not depend on the machine or its load (no
    test asserts a time). Yields a one-item list with the count so far. The block is stopped
    by the exception where the bound is crossed, and fails at its end even where the code under
    test caught that exception."""
    count = [0]

    def profile(frame, event, arg):
        if event == "call":
            count[0] += 1
            if count[0] > max_calls:
                sys.setprofile(None)
                raise WorkExceeded(f"more than {max_calls} Python calls")

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)
    if count[0] > max_calls:
        raise WorkExceeded(f"more than {max_calls} Python calls (the exception was caught)")


def legends_inside(fig, name: str) -> int:
    """Assert that every visible legend of ``fig`` (the figure's and its axes') lies inside the
    figure's own box, half a pixel of slack; return how many there are."""
    renderer, box = fig._get_renderer(), fig.bbox
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    legends = [leg for leg in legends if leg is not None and leg.get_visible()]
    for leg in legends:
        e = leg.get_window_extent(renderer)
        assert box.x0 - 0.5 <= e.x0 and e.x1 <= box.x1 + 0.5, (name, e, box)
        assert box.y0 - 0.5 <= e.y0 and e.y1 <= box.y1 + 0.5, (name, e, box)
    return len(legends)
