"""scikit-learn's bundled tables (``digits``, ``diabetes``) read from its data files without
importing scikit-learn (:mod:`ilnrun.datasets.shipped`): the same columns, names, dtypes,
layouts and numbers as its loaders give, hence the same content hash; scikit-learn's loaders
where the files are not where it keeps them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ilnrun.datasets import kind_diabetes, kind_digits, shipped
from ilnrun.datasets.tables import table_identity

pytest.importorskip("sklearn")
ROOT = Path(__file__).resolve().parent.parent


def _sklearn_digits() -> dict:
    from sklearn.datasets import load_digits

    b = load_digits()
    table = {name: b.data[:, i] for i, name in enumerate(b.feature_names)}
    table["digit"] = b.target.astype(float)
    return table


def _sklearn_diabetes() -> dict:
    from sklearn.datasets import load_diabetes

    b = load_diabetes(scaled=False)
    table = {name: b.data[:, i] for i, name in enumerate(b.feature_names)}
    table["target"] = b.target
    return table


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for name in b:
        assert a[name].dtype == b[name].dtype and a[name].strides == b[name].strides, name
        np.testing.assert_array_equal(a[name], b[name])
    assert table_identity("s", a) == table_identity("s", b)


@pytest.mark.parametrize(
    "read,reference",
    [
        (kind_digits.digits_table, _sklearn_digits),
        (kind_diabetes.diabetes_table, _sklearn_diabetes),
    ],
)
def test_the_files_read_give_scikit_learns_tables(read, reference):
    assert shipped.data_folder() is not None
    _same(read(), reference())


@pytest.mark.parametrize(
    "read,reference",
    [
        (kind_digits.digits_table, _sklearn_digits),
        (kind_diabetes.diabetes_table, _sklearn_diabetes),
    ],
)
def test_without_the_files_scikit_learn_loads_them(read, reference, monkeypatch, tmp_path):
    """Files missing, or not of the shape expected: scikit-learn's loader, the same table."""
    monkeypatch.setattr(shipped, "data_folder", lambda: tmp_path)
    _same(read(), reference())
    for name in ("digits.csv.gz", "diabetes_data_raw.csv.gz", "diabetes_target.csv.gz"):
        (tmp_path / name).write_bytes(b"not gzip")
    _same(read(), reference())


def test_reading_them_imports_no_scikit_learn():
    code = (
        "import json, sys\n"
        "from ilnrun.datasets.kind_digits import digits_table\n"
        "from ilnrun.datasets.kind_diabetes import diabetes_table\n"
        "digits_table(); diabetes_table()\n"
        "print(json.dumps(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
