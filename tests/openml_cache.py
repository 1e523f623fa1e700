"""A fake ``fetch_openml`` cache for the tests (no test may download): :func:`openml_cache_put`
writes a numeric table where scikit-learn's ``fetch_openml`` looks for it, and
:func:`openml_example` is the ``openml`` kind's small example for the contract tests (its data
cannot be made up by ilnrun itself, so the example lives here, with the writer)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np


def openml_cache_put(
    data_home: str | Path, name: str, table: dict, target: str, did: int, version: int = 1
) -> None:
    """Write a ``table`` into a ``fetch_openml`` cache under ``data_home`` as OpenML data set
    ``name`` / ``version`` with id ``did`` and default target ``target``: the API answers
    (name search, description, features, qualities) and the ARFF file, gzipped where
    ``fetch_openml`` looks for them, with the checksum it verifies; afterwards
    ``kind: openml`` reads ``name`` from the cache. A column of numbers is a numeric
    attribute; a column of strings a nominal one (as OpenML's classification targets are),
    which ``fetch_openml`` reads as a pandas categorical."""
    root = Path(data_home).expanduser() / "openml" / "openml.org"

    def put(path: str, payload: bytes) -> None:
        f = root / (path + ".gz")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(gzip.compress(payload))

    cols = list(table)
    nominal = {c: sorted(set(map(str, table[c]))) for c in cols if _is_text(table[c])}
    values = [
        [str(v) for v in table[c]] if c in nominal else np.asarray(table[c], dtype=float).tolist()
        for c in cols
    ]
    lines = [f"@RELATION {name}"]
    lines += [
        f"@ATTRIBUTE {c} {{{','.join(nominal[c])}}}" if c in nominal else f"@ATTRIBUTE {c} NUMERIC"
        for c in cols
    ]
    lines += ["@DATA"]
    lines += [
        ",".join(v if isinstance(v, str) else repr(v) for v in row)
        for row in zip(*values, strict=True)
    ]
    arff = ("\n".join(lines) + "\n").encode()
    file_id = did + 1
    api = "api/v1/json/data"
    dataset = {"did": did, "name": name, "version": version, "status": "active"}
    put(
        f"{api}/list/data_name/{name}/limit/2/data_version/{version}",
        json.dumps({"data": {"dataset": [dataset]}}).encode(),
    )
    desc = {
        "id": str(did),
        "name": name,
        "version": str(version),
        "description": f"{name}, written into the cache by the tests",
        "format": "ARFF",
        "status": "active",
        "file_id": str(file_id),
        "default_target_attribute": target,
        "url": f"https://www.openml.org/data/v1/download/{file_id}/{name}.arff",
        "md5_checksum": hashlib.md5(arff).hexdigest(),
    }
    put(f"{api}/{did}", json.dumps({"data_set_description": desc}).encode())
    feats = [
        {
            "index": str(i),
            "name": c,
            "data_type": "nominal" if c in nominal else "numeric",
            "is_target": str(c == target).lower(),
            "is_ignore": "false",
            "is_row_identifier": "false",
            "number_of_missing_values": "0",
        }
        for i, c in enumerate(cols)
    ]
    put(f"{api}/features/{did}", json.dumps({"data_features": {"feature": feats}}).encode())
    qual = [{"name": "NumberOfInstances", "value": f"{len(values[0])}.0"}]
    put(f"{api}/qualities/{did}", json.dumps({"data_qualities": {"quality": qual}}).encode())
    put(f"data/v1/download/{file_id}/{name}.arff", arff)


def _is_text(column) -> bool:
    return np.asarray(column).dtype.kind in "OUS"


def _example_openml(folder: Path) -> dict:
    """A small data set written into a cache under ``folder`` (no network needed)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 150)).round(6)
    openml_cache_put(folder, "ilnrun-example", {"a": a, "b": b, "y": 2 * a - b}, "y", 990101)
    return {"name": "ilnrun-example", "data_home": str(folder), "T": 60, "n_val": 40}


def openml_example(folder: Path) -> dict:
    """A small data set written into a cache under ``folder`` (no network needed)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 150)).round(6)
    openml_cache_put(folder, "ilnrun-example", {"a": a, "b": b, "y": 2 * a - b}, "y", 990101)
    return {"name": "ilnrun-example", "data_home": str(folder), "T": 60, "n_val": 40}


def openml_binary_example(folder: Path) -> dict:
    """A small classification data set (nominal target ``cls``: ``pos``, ``neg`` and a third
    class ``other`` that the example leaves out) written into a cache under ``folder``."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 150)).round(6)
    cls = np.where(a + b > 0.5, "pos", np.where(a + b < -0.5, "neg", "other"))
    openml_cache_put(folder, "ilnrun-classes", {"a": a, "b": b, "cls": cls}, "cls", 990102)
    return {
        "name": "ilnrun-classes",
        "data_home": str(folder),
        "classes": ["pos", "neg"],
        "T": 40,
        "n_val": 20,
    }


# examples of the dataset kinds that do not carry their own (``DatasetSpec.example is None``)
EXAMPLES = {"openml": openml_example, "openml_binary": openml_binary_example}
