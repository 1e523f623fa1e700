"""Trust, part 2: results directories are ilnrun's only by its manifest; --fresh deletes exactly
what ilnrun wrote; symlinks and broken files are refused (exit 2, no lock left); resume keeps
only records of this config (digest) and skips corrupt lines."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import TINY_CELLS, refused, tiny_config, write_config

from ilnrun import results as R
from ilnrun.cli import main
from ilnrun.results import MANIFEST

USER_FILES = (
    "figure1_annotated_for_paper.pdf",
    "curves-notes.png",
    "regret_slide.png",
    "budget_sweep_v2.pdf",
    "notes.txt",
)


def _run(cfg_path: Path, out: Path, *extra: str):
    return CliRunner().invoke(main, ["run", str(cfg_path), "--out", str(out), "-q", *extra])


def _tables(d: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for name in ("runs.csv", "summary.csv", "curves.csv"):
        df = pd.read_csv(d / name)
        out[name] = df.drop(columns=[c for c in df.columns if c.startswith(("wall_s", "eval_s"))])
    return out


def _assert_same_tables(a: Path, b: Path) -> None:
    ta, tb = _tables(a), _tables(b)
    for name in ta:
        pd.testing.assert_frame_equal(ta[name], tb[name], check_exact=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny config and a finished run of it (not to be modified by tests)."""
    d = tmp_path_factory.mktemp("ref")
    cfg_path = write_config(d / "tiny.yaml", tiny_config())
    out = d / "out"
    assert _run(cfg_path, out).exit_code == 0
    return cfg_path, out


def _copy(reference: tuple[Path, Path], tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(reference[1], out, symlinks=True)
    (out / ".lock").unlink()  # left by the finished run (released): check none is created
    return out


def _manifest(d: Path) -> list[str]:
    return json.loads((d / MANIFEST).read_text())["files"]


# ---- ownership ----------------------------------------------------------------------------------


def test_fresh_deletes_exactly_the_files_ilnrun_wrote(reference, tmp_path):
    from ilnrun.plots import plot_results
    from ilnrun.report import build_report

    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    plot_results(out, ["png"])
    build_report(out, out)
    files = _manifest(out)
    for name in ("cells.jsonl", "runs.csv", "config.yaml", "meta.json", "figure1.png", "REPORT.md"):
        assert name in files
    for name in USER_FILES:
        (out / name).write_text("mine")
    res = _run(cfg_path, out, "--fresh")
    assert res.exit_code == 0, res.output
    for name in USER_FILES:
        assert (out / name).read_text() == "mine"
    assert not (out / "figure1.png").exists() and not (out / "REPORT.md").exists()
    assert "figure1.png" not in _manifest(out)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "resume"])
def test_a_directory_ilnrun_did_not_create_is_refused_and_left_alone(config_file, tmp_path, fresh):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.yaml").write_text("name: something of mine\n")
    (out / "thesis.tex").write_text("mine")
    res = _run(config_file, out, *(["--fresh"] if fresh else []))
    refused(res, str(out))
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "thesis.tex"]  # no .lock


def test_an_empty_directory_is_claimed(config_file, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert _run(config_file, out).exit_code == 0
    assert "runs.csv" in _manifest(out)


def test_results_without_a_manifest_are_adopted_on_resume_only(reference, tmp_path):
    cfg_path, ref = reference
    out = _copy(reference, tmp_path)
    (out / MANIFEST).unlink()
    (out / "figure1.png").write_text("a figure someone made")
    res = _run(cfg_path, out)
    assert res.exit_code == 0, res.output
    assert set(_manifest(out)) == set(R.CELL_LOG.split()) | {
        "runs.csv",
        "summary.csv",
        "curves.csv",
        "config.yaml",
        "meta.json",
    }
    _assert_same_tables(ref, out)


@pytest.mark.parametrize("name", ["cells.jsonl", "runs.csv", "config.yaml", "meta.json", ".lock"])
def test_symlinks_out_of_the_directory_are_refused(reference, tmp_path, name):
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(outside)
    had_lock = name == ".lock"
    for extra in ([], ["--fresh"]):
        res = _run(cfg_path, out, *extra)
        refused(res, name, "symbolic link")
    assert outside.read_text() == "precious\n"
    assert (out / ".lock").is_symlink() if had_lock else not (out / ".lock").exists()


def test_a_directory_where_a_file_should_be_is_refused(reference, tmp_path):
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    (out / "runs.csv").unlink()
    (out / "runs.csv").mkdir()
    refused(_run(cfg_path, out), "runs.csv", "not a regular file")
    assert not (out / ".lock").exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("config.yaml", "name: [unclosed\n"),
        ("config.yaml", "- a list\n"),
        ("meta.json", "\x00garbage{"),
        ("meta.json", "[1, 2]"),
    ],
    ids=["config broken", "config a list", "meta garbage", "meta a list"],
)
def test_broken_own_files_exit_2_and_say_what_to_do(reference, tmp_path, name, content):
    cfg_path, ref = reference
    out = _copy(reference, tmp_path)
    (out / name).write_text(content)
    refused(_run(cfg_path, out), name, "--fresh")
    assert not (out / ".lock").exists()
    res = _run(cfg_path, out, "--fresh")
    assert res.exit_code == 0, res.output
    _assert_same_tables(ref, out)


def test_a_broken_manifest_is_refused(reference, tmp_path):
    cfg_path, _ = reference
    out = _copy(reference, tmp_path)
    (out / MANIFEST).write_text('{"files": ["../../etc/passwd"]}')
    for extra in ([], ["--fresh"]):
        refused(_run(cfg_path, out, *extra), MANIFEST)
    assert (out / "runs.csv").exists()


def test_failed_atomic_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "runs.csv"
    target.write_text("old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(R.os, "replace", boom)
    with pytest.raises(OSError):
        R.write_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]


# ---- resume checks what it resumes ---------------------------------------------------------------


def test_records_of_another_seed_are_ignored_with_a_count(reference, tmp_path):
    cfg_path, ref = reference
    other_cfg = write_config(tmp_path / "seed8.yaml", tiny_config(seed=8))
    other = tmp_path / "seed8"
    assert _run(other_cfg, other).exit_code == 0
    out = _copy(reference, tmp_path)
    shutil.copyfile(other / "cells.jsonl", out / "cells.jsonl")  # same cell ids, other seed
    res = _run(cfg_path, out)
    assert res.exit_code == 0, res.output
    assert f"ignored {TINY_CELLS} records of another config" in res.stderr
    _assert_same_tables(ref, out)


def test_corrupt_lines_anywhere_are_skipped_and_their_cells_rerun(reference, tmp_path):
    cfg_path, ref = reference
    out = _copy(reference, tmp_path)
    lines = (out / "cells.jsonl").read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[5])
    garbage = [
        b"{not json\n",
        b"\xff\xfe\x00 bad bytes\n",
        b"[1, 2, 3]\n",
        b'{"id": 3, "row": {}, "curve": {}}\n',
        json.dumps({**rec, "row": "a string"}).encode() + b"\n",
        json.dumps({k: v for k, v in rec.items() if k != "curve"}).encode() + b"\n",
        json.dumps({**rec, "curve": {"t": [1, 2], "online_loss": ["x"]}}).encode() + b"\n",
        b"[" * 100_000 + b"\n",
    ]
    lines[3] = garbage[0]  # replaces finished cells: they must run again
    lines[5] = garbage[1]
    lines[10:10] = garbage[2:]
    (out / "cells.jsonl").write_bytes(b"".join(lines))
    res = _run(cfg_path, out)
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output + res.stderr
    assert f"skipped {len(garbage)} corrupt line(s)" in res.stderr
    _assert_same_tables(ref, out)
    res = _run(
        cfg_path, out
    )  # the lines stay in the log: said again only when their number changes
    assert res.exit_code == 0 and "corrupt" not in res.stderr, res.stderr
    with open(out / "cells.jsonl", "ab") as fh:
        fh.write(garbage[0])
    res = _run(cfg_path, out)
    assert f"skipped {len(garbage) + 1} corrupt line(s)" in res.stderr, res.stderr


def test_every_record_carries_its_digest(reference):
    from ilnrun import config as C

    cfg_path, ref = reference
    cfg = C.load(cfg_path)
    digests = {c.id: C.record_digest(cfg, c) for c in C.cells(cfg)}
    recs = [json.loads(x) for x in (ref / "cells.jsonl").read_text().splitlines()]
    assert {r["id"]: r["digest"] for r in recs} == digests
    other = C.load(write_config(ref.parent / "fourier.yaml", tiny_config(seed=9)))
    c = C.cells(cfg)[0]
    assert C.record_digest(other, c) != C.record_digest(cfg, c)
    assert os.path.exists(ref / MANIFEST)
