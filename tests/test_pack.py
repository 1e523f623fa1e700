"""``ilnrun pack``: the compressed folder a committed report ships with; the readers take its
``<table>.csv.gz`` under the same byte cap; ``plot`` and ``report`` draw from it without writing
into it (docs/protocol.md §10.6)."""

from __future__ import annotations

import gzip
import os
import shutil
import zlib

import pytest
from conftest import invoke, refused

from ilnrun import readers
from ilnrun.pack import gzip_bytes
from ilnrun.readers import RUNS_COLUMNS, ResultsError, read_table

PACKED = ["config.yaml", "curves.csv.gz", "meta.json", "runs.csv.gz", "summary.csv.gz"]


@pytest.fixture
def results(finished_run, tmp_path):
    """A copy of the tiny run's results directory."""
    _, out, result = finished_run
    assert result.exit_code == 0, result.output
    copy = tmp_path / "results"
    shutil.copytree(out, copy)
    return copy


@pytest.fixture
def packed(results, tmp_path):
    out = tmp_path / "exp" / "tiny" / "results"
    res = invoke(["pack", results, "--out", out])
    assert res.exit_code == 0, res.output
    return out


def visible(d):
    return sorted(p.name for p in d.iterdir() if not p.name.startswith("."))


def test_pack_writes_what_report_and_plot_read_and_states_its_size(results, tmp_path):
    out = tmp_path / "packed"
    res = invoke(["pack", results, "--out", out])
    assert res.exit_code == 0, res.output
    assert visible(out) == PACKED  # no cell log, no figures
    total = sum((out / n).stat().st_size for n in PACKED)
    assert f"{total:,} bytes in all" in res.output
    for name in ("runs.csv", "summary.csv", "curves.csv"):  # the run's bytes, unchanged
        assert gzip.decompress((out / f"{name}.gz").read_bytes()) == (results / name).read_bytes()
    for name in ("config.yaml", "meta.json"):
        assert (out / name).read_bytes() == (results / name).read_bytes()


def test_packing_is_byte_reproducible(results, tmp_path):
    for d in ("a", "b"):
        assert invoke(["pack", results, "--out", tmp_path / d]).exit_code == 0
    for name in PACKED:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    data = (tmp_path / "a" / "runs.csv.gz").read_bytes()
    assert data[3] == 0 and data[4:8] == b"\0\0\0\0" and data[9] == 255  # no name, mtime 0
    assert gzip_bytes(b"x" * 1000) == gzip_bytes(b"x" * 1000)
    # packing the packed folder again gives the same bytes
    assert invoke(["pack", tmp_path / "a", "--out", tmp_path / "c"]).exit_code == 0
    for name in PACKED:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()


def test_other_results_are_never_packed_over_silently(results, packed, tmp_path):
    assert invoke(["pack", results, "--out", packed]).exit_code == 0  # the same: nothing changes
    meta = results / "meta.json"
    meta.write_text(meta.read_text().replace('"jobs": 1', '"jobs": 3'))
    before = (packed / "meta.json").read_bytes()
    refused(invoke(["pack", results, "--out", packed]), str(packed), "meta.json", "--replace")
    assert (packed / "meta.json").read_bytes() == before
    assert invoke(["pack", results, "--out", packed, "--replace"]).exit_code == 0
    assert (packed / "meta.json").read_bytes() == meta.read_bytes()


def test_pack_refuses_bad_input_naming_the_path(results, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused(invoke(["pack", results, "--out", foreign]), str(foreign), "not empty")
    assert visible(foreign) == ["notes.txt"]
    refused(invoke(["pack", results, "--out", results]), str(results))
    refused(invoke(["pack", results]), "--out")
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(invoke(["pack", empty, "--out", tmp_path / "o1"]), str(empty / "config.yaml"))
    (results / "summary.csv").write_text("not,a\ntable")
    refused(invoke(["pack", results, "--out", tmp_path / "o2"]), str(results / "summary.csv"))
    assert not (tmp_path / "o2").exists()


def test_a_compressed_table_is_read_where_the_plain_one_is_absent(results):
    plain = read_table(results, "runs.csv", RUNS_COLUMNS)
    (results / "runs.csv.gz").write_bytes(gzip_bytes(b"method\n"))  # the plain table wins
    assert read_table(results, "runs.csv", RUNS_COLUMNS).equals(plain)
    (results / "runs.csv.gz").write_bytes(gzip_bytes((results / "runs.csv").read_bytes()))
    (results / "runs.csv").unlink()
    assert read_table(results, "runs.csv", RUNS_COLUMNS).equals(plain)


def test_a_compression_bomb_and_a_damaged_file_are_refused_by_name(results, monkeypatch):
    monkeypatch.setattr(readers, "MAX_TABLE_BYTES", 100_000)
    bomb = gzip_bytes(b"method,setting\n" + b"0" * 10_000_000)  # 10 MB in about 10 kB
    assert len(bomb) < 100_000
    (results / "summary.csv").unlink()
    (results / "summary.csv.gz").write_bytes(bomb)
    with pytest.raises(ResultsError, match="decompresses to more than 100,000 bytes"):
        read_table(results, "summary.csv", ())
    refused(invoke(["report", results, "--out", results.parent / "r"]), "summary.csv.gz")
    small = gzip_bytes(b"method,dsgd_k,n\n")
    for damaged in (small[:-6], b"\x1f\x8b" + b"junk" * 10, zlib.compress(b"a,b\n1,2\n")):
        (results / "summary.csv.gz").write_bytes(damaged)
        with pytest.raises(ResultsError, match="not a gzip-compressed table"):
            read_table(results, "summary.csv", ())
        plot = ["plot", results, "--out", results.parent / "f", "--format", "png"]
        out = refused(invoke(plot), str(results / "summary.csv.gz"))
        assert "not a gzip-compressed table" in out


def test_a_packed_folder_is_never_written(results, packed, tmp_path):
    before = {n: (packed / n).read_bytes() for n in os.listdir(packed)}
    refused(invoke(["plot", packed]), str(packed), "--out")
    refused(invoke(["report", packed]), str(packed), "--out")
    refused(invoke(["report", packed, "--out", packed]), str(packed), "--out")
    refused(invoke(["plot", packed, "--out", packed]), str(packed), "--out")
    refused(invoke(["run", packed / "config.yaml", "--out", packed]), str(packed), "packed")
    figures = tmp_path / "figures"
    res = invoke(["plot", packed, "--out", figures, "--format", "png"])
    assert res.exit_code == 0, res.output
    assert invoke(["plot", results, "--format", "png"]).exit_code == 0
    drawn = [n for n in visible(results) if n.endswith(".png")]
    assert "figure1.png" in drawn and visible(figures) == drawn  # the same figures
    res = invoke(["report", packed, "--out", packed.parent])
    assert res.exit_code == 0, res.output
    assert visible(packed.parent) == sorted(["REPORT.md", "results", *drawn])
    assert {n: (packed / n).read_bytes() for n in os.listdir(packed)} == before


def test_a_checkout_without_manifests_regenerates_and_repacks(results, packed, tmp_path):
    """Git keeps no manifest (.gitignore): a cloned report folder holds REPORT.md, its figures
    and results/ only; ilnrun recognises them as its own."""
    assert invoke(["report", packed, "--out", packed.parent]).exit_code == 0
    clone = tmp_path / "clone" / "tiny"
    shutil.copytree(packed.parent, clone, ignore=shutil.ignore_patterns(".*"))
    res = invoke(["report", clone / "results", "--out", clone])
    assert res.exit_code == 0, res.output
    assert invoke(["pack", results, "--out", clone / "results"]).exit_code == 0
    (clone / "notes.txt").write_text("mine")  # not ilnrun's: the folder is not adopted
    fresh = tmp_path / "clone2" / "tiny"
    shutil.copytree(clone, fresh, ignore=shutil.ignore_patterns(".*"))
    refused(invoke(["report", fresh / "results", "--out", fresh]), str(fresh), "not empty")
