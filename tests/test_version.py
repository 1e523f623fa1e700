"""The version: one number in pyproject.toml and ``ilnrun.__version__``, printed by
``ilnrun --version``, written to ``meta.json``; a results directory of another version is resumed
with a note naming that version, or refused with a message saying why."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import TINY_CELLS, invoke, tiny_config, write_config

import ilnrun

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_everywhere():
    text = (ROOT / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert declared == ilnrun.__version__ == "0.2.0"
    res = invoke(["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"ilnrun, version {ilnrun.__version__}"


def test_meta_carries_the_version(finished_run):
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ilnrun_version"] == ilnrun.__version__
    assert meta["versions"]["ilnrun"] == ilnrun.__version__
    assert "resumed_from_version" not in meta


def _as_older(copy: Path, version: str | None) -> None:
    """Rewrite ``meta.json`` as an older ilnrun wrote it (no ``ilnrun_version``)."""
    meta = json.loads((copy / "meta.json").read_text())
    del meta["ilnrun_version"]
    meta["versions"]["ilnrun"] = version
    (copy / "meta.json").write_text(json.dumps(meta))


def test_older_directory_is_resumed_with_a_note(finished_run, tmp_path):
    cfg_path, out, _ = finished_run
    for old, said in (("0.1.0", "version 0.1.0"), (None, "an unknown earlier version")):
        copy = tmp_path / f"copy-{old}"
        shutil.copytree(out, copy)
        _as_older(copy, old)
        runs = (copy / "runs.csv").read_bytes()
        res = invoke(["run", cfg_path, "--out", copy, "--quiet"])
        assert res.exit_code == 0, res.output
        assert f"resuming {copy}, written by ilnrun {said}" in res.output
        assert f"this is {ilnrun.__version__}" in res.output
        assert (copy / "runs.csv").read_bytes() == runs  # every cell kept
        meta = json.loads((copy / "meta.json").read_text())
        assert meta["ilnrun_version"] == ilnrun.__version__
        assert meta["resumed_from_version"] == (old or "unknown")
        assert meta["cells_resumed"] == TINY_CELLS
    # the same version: no note
    res = invoke(["run", cfg_path, "--out", copy, "--quiet"])
    assert res.exit_code == 0 and "written by ilnrun" not in res.output


def test_older_directory_with_another_config_is_refused_saying_why(finished_run, tmp_path):
    _, out, _ = finished_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    _as_older(copy, "0.1.0")
    other = write_config(tmp_path / "other.yaml", tiny_config(**{"dataset.T": 31}))
    res = invoke(["run", other, "--out", copy])
    assert res.exit_code == 2, res.output
    assert "refused: the results were written by ilnrun 0.1.0" in res.output
    assert "dataset.T" in res.output and "Traceback" not in res.output


# (cell id, record digest) of one cell of each config, as written by ilnrun 0.1.0: results of
# that version must resume cell by cell (parameters added since are left out of the digest at
# their key_omit, Param.since).
RECORDS_0_1_0 = {
    "figure1": (
        "ed9e25d2ece3ea03369c",
        "aa23bed0e7bf0fa0b2f9f7548ce656c8d8a21a78667d2081569838c7b58fee63",
    ),
    "budget_sweep": (
        "6464318b1a92360ccbdb",
        "a5a2bea8c1ec85269c318b71bab8907dbac9cb9199ff07bff36c9857bafa730f",
    ),
}


@pytest.mark.parametrize("name", sorted(RECORDS_0_1_0))
def test_records_of_0_1_0_keep_their_digest(name):
    from ilnrun import config as C

    cell_id, want = RECORDS_0_1_0[name]
    exp = C.load(Path(__file__).resolve().parents[1] / "configs" / f"{name}.yaml")
    cell = next(c for c in C.cells(exp) if c.id == cell_id)
    assert C.record_digest(exp, cell) == want
