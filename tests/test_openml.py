"""The ``openml`` dataset kind: scikit-learn's ``fetch_openml`` by name, read from its on-disk
cache. No test may download, so each test writes a small data set into a fake cache folder,
laid out exactly as ``fetch_openml`` caches the OpenML API answers and the ARFF file."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ilnrun.data import DataError, build_dataset, check

pytest.importorskip("sklearn")

DID, FILE_ID, NAME = 990001, 990002, "ilnrun-toy"


def _put(home: Path, path: str, payload: bytes) -> None:
    f = home / "openml" / "openml.org" / (path + ".gz")  # fetch_openml caches under openml/
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(gzip.compress(payload))


def fake_cache(home: Path, n: int = 120, seed: int = 0) -> dict[str, np.ndarray]:
    """A data set of ``n`` rows (``a``, ``b`` numeric; target ``y = 2a - b + 1``) cached under
    ``home`` as fetch_openml would cache it; returns its columns."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n).round(6), rng.normal(size=n).round(6)
    y = 2 * a - b + 1
    arff = (
        "\n".join(
            [
                "@RELATION toy",
                "@ATTRIBUTE a NUMERIC",
                "@ATTRIBUTE b NUMERIC",
                "@ATTRIBUTE y NUMERIC",
                "@DATA",
            ]
            + [
                f"{x!s},{z!s},{float(t)!r}"
                for x, z, t in zip(a.tolist(), b.tolist(), y.tolist(), strict=True)
            ]
        ).encode()
        + b"\n"
    )
    api = "api/v1/json/data"
    dataset = {"did": DID, "name": NAME, "version": 1, "status": "active", "format": "ARFF"}
    _put(
        home,
        f"{api}/list/data_name/{NAME}/limit/2/data_version/1",
        json.dumps({"data": {"dataset": [dataset]}}).encode(),
    )
    desc = {
        "id": str(DID),
        "description": "a toy table for the tests",
        "name": NAME,
        "version": "1",
        "format": "ARFF",
        "status": "active",
        "file_id": str(FILE_ID),
        "default_target_attribute": "y",
        "url": f"https://www.openml.org/data/v1/download/{FILE_ID}/{NAME}.arff",
        "md5_checksum": hashlib.md5(arff).hexdigest(),
    }
    _put(home, f"{api}/{DID}", json.dumps({"data_set_description": desc}).encode())
    feats = [
        {
            "index": str(i),
            "name": c,
            "data_type": "numeric",
            "is_target": str(c == "y").lower(),
            "is_ignore": "false",
            "is_row_identifier": "false",
            "number_of_missing_values": "0",
        }
        for i, c in enumerate(("a", "b", "y"))
    ]
    _put(home, f"{api}/features/{DID}", json.dumps({"data_features": {"feature": feats}}).encode())
    qual = [{"name": "NumberOfInstances", "value": f"{n}.0"}]
    _put(home, f"{api}/qualities/{DID}", json.dumps({"data_qualities": {"quality": qual}}).encode())
    _put(home, f"data/v1/download/{FILE_ID}/{NAME}.arff", arff)
    return {"a": a, "b": b, "y": y}


def _spec(home: Path, **kw) -> dict:
    return {
        "kind": "openml",
        "name": NAME,
        "version": 1,
        "data_home": str(home),
        "target": None,
        "log_target": False,
        "features": "all",
        "T": 60,
        "n_val": 20,
        "n_test": "rest",
        "standardize": False,
        "center": False,
        **kw,
    }


def test_openml_reads_the_cache_by_name_with_the_default_target(tmp_path):
    cols = fake_cache(tmp_path)
    d = build_dataset(_spec(tmp_path), np.random.default_rng(0))
    assert d.X_train.shape == (60, 2) and len(d.y_test) == 40
    rows = np.asarray(d.info["rows"])
    X = np.column_stack([cols["a"], cols["b"]])[rows]
    y = cols["y"][rows]
    np.testing.assert_allclose(np.vstack([d.X_train, d.X_val, d.X_test]), X)
    np.testing.assert_allclose(
        np.concatenate([d.y_train, d.y_val, d.y_test]), y / np.abs(y[:60]).max()
    )
    assert check(_spec(tmp_path)) == []


def test_openml_named_target_and_missing_cache_are_reported(tmp_path):
    fake_cache(tmp_path)
    d = build_dataset(_spec(tmp_path, target="a", features="b"), np.random.default_rng(0))
    assert d.X_train.shape == (60, 1)
    problems = check(_spec(tmp_path, target="nope"))
    assert problems and problems[0][0] == "target"
    # an empty cache and no network: a DataError naming the key, never a traceback
    empty = tmp_path / "empty"
    import socket

    def no_network(*a, **k):
        raise OSError("network disabled in tests")

    mp = pytest.MonkeyPatch()
    mp.setattr(socket, "create_connection", no_network)
    mp.setattr(socket.socket, "connect", no_network)
    try:
        with pytest.raises(DataError) as err:
            build_dataset(_spec(empty), np.random.default_rng(0))
    finally:
        mp.undo()
    assert err.value.key == "name" and "not in the cache" in err.value.message
