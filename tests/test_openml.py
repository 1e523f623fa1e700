"""The ``openml`` dataset kind: scikit-learn's ``fetch_openml`` by name, read from its on-disk
cache. No test may download, so each test writes a small data set into a fake cache folder,
laid out exactly as ``fetch_openml`` caches the OpenML API answers and the ARFF file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from openml_cache import openml_cache_put

from ilnrun.datasets import DataError, build_dataset, check

pytest.importorskip("sklearn")

DID, NAME = 990001, "ilnrun-toy"


def fake_cache(home: Path, n: int = 120, seed: int = 0) -> dict[str, np.ndarray]:
    """A data set of ``n`` rows (``a``, ``b`` numeric; target ``y = 2a - b + 1``) written into a
    fetch_openml cache under ``home`` (:func:`openml_cache.openml_cache_put`); its columns."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n).round(6), rng.normal(size=n).round(6)
    cols = {"a": a, "b": b, "y": 2 * a - b + 1}
    openml_cache_put(home, NAME, cols, "y", DID)
    return cols


def test_the_cache_is_laid_out_as_fetch_openml_reads_it(tmp_path):
    """scikit-learn itself reads what openml_cache_put wrote (checksum included)."""
    from sklearn.datasets import fetch_openml

    cols = fake_cache(tmp_path)
    bunch = fetch_openml(
        name=NAME, version=1, data_home=str(tmp_path), as_frame=True, parser="pandas"
    )
    assert bunch.target_names == ["y"]
    np.testing.assert_allclose(bunch.frame["a"].to_numpy(), cols["a"])
    np.testing.assert_allclose(bunch.target.to_numpy(), cols["y"])


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
