"""Data read by name is part of the config: a plotnine table or an OpenML cache whose content
changed between a run and its resume is refused naming the key, a data file moved or renamed
with the same bytes resumes every cell, and a data file's suffix and size are checked before a
byte of it is read (then it is hashed in chunks)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import invoke, read_meta, refused, tiny_config, write_config
from openml_cache import openml_cache_put

from ilnrun import config as C
from ilnrun.datasets import identity, reader, table_identity

METHODS = {"kernel_ogd": {"eta": [0.3, 1.0], "schedule": "constant"}}


def _config(dataset: dict) -> dict:
    cfg = tiny_config()
    cfg["repetitions"] = 1
    cfg["dataset"] = dataset
    cfg["methods"] = METHODS
    return cfg


# ----------------------------------------------------------------------------------------------
# tables read by name


PLOTNINE = {"kind": "plotnine", "name": "mpg", "target": "hwy", "features": "displ,cyl,cty"}


def _plotnine_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "c.yaml", _config({**PLOTNINE, "T": 40, "n_val": 30}))


def test_a_changed_plotnine_table_is_refused_on_resume_naming_the_key(tmp_path, monkeypatch):
    pytest.importorskip("plotnine")
    import plotnine.data as shipped

    path, out = _plotnine_config(tmp_path), tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q", "--jobs", "1"]).exit_code == 0
    (entry,) = yaml.safe_load((out / "config.yaml").read_text())["inputs"].values()
    assert len(entry["sha256"]) == 64 and "mpg" in entry["source"]
    changed = shipped.mpg.copy()
    changed.loc[changed.index[:12], "hwy"] += 1  # 12 labels differ, same shape
    monkeypatch.setattr(shipped, "mpg", changed)
    refused(invoke(["run", path, "--out", out, "-q"]), "inputs.plotnine:mpg.sha256", "--fresh")
    monkeypatch.undo()  # the shipped table again: the same config
    res = invoke(["run", path, "--out", out, "-q", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert read_meta(out)["cells_resumed"] == read_meta(out)["cells"]


def test_results_without_a_table_hash_resume_and_record_it(tmp_path):
    """Results written before tables read by name were hashed (no ``inputs`` in their
    config.yaml) resume every cell; the hash is recorded from then on."""
    pytest.importorskip("plotnine")
    path, out = _plotnine_config(tmp_path), tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q", "--jobs", "1"]).exit_code == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    inputs = saved.pop("inputs")
    (out / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    res = invoke(["run", path, "--out", out, "-q", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert read_meta(out)["cells_resumed"] == read_meta(out)["cells"]
    assert yaml.safe_load((out / "config.yaml").read_text())["inputs"] == inputs
    res = invoke(["report", out, "--out", tmp_path / "report"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "report" / "REPORT.md").read_text()
    assert f"Data read: plotnine table mpg: {inputs['plotnine:mpg']['bytes']:,} bytes" in text


def _openml(home: Path, shift: float = 0.0) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 120)).round(6)
    y = 2 * a - b
    y[:12] += shift
    openml_cache_put(home, "ilnrun-toy", {"a": a, "b": b, "y": y}, "y", 990001)


def test_a_changed_openml_cache_is_refused_on_resume_naming_the_key(tmp_path):
    pytest.importorskip("sklearn")
    home = tmp_path / "cache"
    _openml(home)
    ds = {"kind": "openml", "name": "ilnrun-toy", "data_home": str(home), "T": 40, "n_val": 30}
    path, out = write_config(tmp_path / "c.yaml", _config(ds)), tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q", "--jobs", "1"]).exit_code == 0
    _openml(home, shift=0.5)  # the same name and version, other labels
    refused(invoke(["run", path, "--out", out, "-q"]), "inputs.openml:ilnrun-toy@1.sha256")


def test_extend_refuses_data_changed_under_the_same_name(tmp_path):
    """B8: an OpenML cache changed under the same name, id and shape, and a config with one
    more repetition: --extend (like a plain resume) is refused naming the table, without
    advising --extend, and nothing in the directory changes; --fresh then runs every cell."""
    pytest.importorskip("sklearn")
    home = tmp_path / "cache"
    _openml(home)
    ds = {"kind": "openml", "name": "ilnrun-toy", "data_home": str(home), "T": 40, "n_val": 30}
    out = tmp_path / "results"
    path = write_config(tmp_path / "c.yaml", _config(ds))
    assert invoke(["run", path, "--out", out, "-q", "--jobs", "1"]).exit_code == 0
    _openml(home, shift=0.5)  # the same name, id and shape, other labels
    more = write_config(tmp_path / "more.yaml", {**_config(ds), "repetitions": 2})
    log = (out / "cells.jsonl").read_bytes()
    for config, extra in ((more, ["--extend"]), (path, [])):
        res = invoke(["run", config, "--out", out, "-q", "--jobs", "1", *extra])
        refused(res, "inputs.openml:ilnrun-toy@1.sha256", "--fresh")
        assert "Use --extend" not in res.output
    assert (out / "cells.jsonl").read_bytes() == log
    res = invoke(["run", more, "--out", out, "-q", "--jobs", "1", "--fresh"])
    assert res.exit_code == 0, res.output
    assert read_meta(out)["cells_resumed"] == 0 and read_meta(out)["cells"] == 4


def _run_then_change_the_data(tmp_path: Path) -> tuple[Path, Path, str]:
    """A finished run of a ``file`` config whose CSV is then rewritten in place with other
    values: ``(config path, results directory, the CSV's resolved path)``."""
    _csv(tmp_path / "t.csv")
    path, out = _file_config(tmp_path, "t.csv"), tmp_path / "results"
    assert invoke(["run", path, "--out", out, "-q", "--jobs", "1"]).exit_code == 0
    _csv(tmp_path / "t.csv", seed=1)
    return path, out, str((tmp_path / "t.csv").resolve())


def test_extend_refuses_a_data_file_changed_in_place(tmp_path):
    path, out, where = _run_then_change_the_data(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    more = write_config(tmp_path / "more.yaml", {**cfg, "repetitions": 2})
    refused(invoke(["run", more, "--out", out, "-q", "--extend"]), f"inputs.{where}.sha256")


def test_table_identity_is_the_content():
    t = {"a": np.arange(3.0), "b": np.ones(3)}
    same = {"a": np.arange(3.0), "b": np.ones(3)}
    assert table_identity("x", t)["sha256"] == table_identity("y", same)["sha256"]
    for other in (
        {"a": np.arange(3.0), "b": np.array([1.0, 1.0, 1.0 + 1e-15])},  # a value
        {"b": np.ones(3), "a": np.arange(3.0)},  # the column order
        {"a": np.arange(3.0), "c": np.ones(3)},  # a name
        {"a": np.arange(3), "b": np.ones(3)},  # a dtype
    ):
        assert table_identity("x", other)["sha256"] != table_identity("x", t)["sha256"]


# ----------------------------------------------------------------------------------------------
# files named by path


def _csv(path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((80, 2))
    y = X @ np.array([1.0, -1.0])
    rows = ["u,v,y"] + [f"{a:.6f},{b:.6f},{t:.6f}" for (a, b), t in zip(X, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")


def _file_config(folder: Path, data: str) -> Path:
    ds = {"kind": "file", "path": data, "target": "y", "T": 30, "n_val": 20}
    return write_config(folder / "c.yaml", _config(ds))


def test_a_data_file_moved_or_renamed_with_the_same_bytes_resumes_every_cell(tmp_path):
    (tmp_path / "old").mkdir()
    _csv(tmp_path / "old" / "t.csv")
    out = tmp_path / "results"
    path = _file_config(tmp_path, "old/t.csv")
    assert invoke(["run", path, "--out", out, "-q", "--jobs", "1"]).exit_code == 0
    ids = [c.id for c in C.cells(C.load(path))]
    (tmp_path / "new").mkdir()
    os.rename(tmp_path / "old" / "t.csv", tmp_path / "new" / "renamed.csv")
    path = _file_config(tmp_path, "new/renamed.csv")
    assert [c.id for c in C.cells(C.load(path))] == ids
    res = invoke(["run", path, "--out", out, "-q", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    meta = read_meta(out)
    assert meta["cells_resumed"] == meta["cells"] == len(ids), res.output
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["dataset"]["path"].endswith("renamed.csv")  # the record names the new place
    # the same name with other bytes is still a changed config
    _csv(tmp_path / "new" / "renamed.csv", seed=1)
    refused(invoke(["run", path, "--out", out, "-q"]), "sha256", "--fresh")


def _no_reading(monkeypatch, path: Path) -> None:
    """Fail the test if ``path`` is opened or read."""
    real_open, real_read = open, Path.read_bytes

    def guarded_open(f, *a, **k):
        assert Path(f) != path, "the file was opened"
        return real_open(f, *a, **k)

    def guarded_read(self):
        assert self != path, "the file was read"
        return real_read(self)

    monkeypatch.setattr("builtins.open", guarded_open)
    monkeypatch.setattr(Path, "read_bytes", guarded_read)


def test_a_huge_data_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """An 8 GiB file (sparse: no disk used) is refused by its size, naming the key; nothing of
    it is read."""
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.truncate(8 << 30)
    _no_reading(monkeypatch, big.resolve())
    res = invoke(["validate", _file_config(tmp_path, "big.csv")])
    refused(res, "dataset.path", "8,589,934,592 bytes", f"{reader.MAX_TABLE_BYTES:,}")


def test_a_file_of_another_type_is_refused_before_it_is_read(tmp_path, monkeypatch):
    data = tmp_path / "t.txt"
    _csv(data)
    _no_reading(monkeypatch, data.resolve())
    refused(invoke(["validate", _file_config(tmp_path, "t.txt")]), "dataset.path", ".csv")


def test_the_file_hash_is_read_in_chunks(tmp_path, monkeypatch):
    """The recorded SHA-256 is that of the bytes, read ``CHUNK`` bytes at a time (never whole)."""
    data = tmp_path / "t.csv"
    _csv(data)
    want = hashlib.sha256(data.read_bytes()).hexdigest()
    monkeypatch.setattr(identity, "CHUNK", 64)
    reads = []
    real_open = open

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            assert 0 < n <= 64, n
            reads.append(n)
            return self.f.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def counting_open(f, mode="r", *a, **k):
        handle = real_open(f, mode, *a, **k)
        return Counting(handle) if Path(f) == data.resolve() and "b" in mode else handle

    monkeypatch.setattr(identity, "open", counting_open, raising=False)
    entry = identity.file_identity(data)
    assert entry == {"sha256": want, "bytes": data.stat().st_size}
    assert len(reads) >= data.stat().st_size // 64


def test_a_changed_data_file_is_refused_naming_its_path(tmp_path):
    path, out, where = _run_then_change_the_data(tmp_path)
    refused(invoke(["run", path, "--out", out, "-q"]), f"inputs.{where}.sha256")
