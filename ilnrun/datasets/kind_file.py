"""``file``: your own data, a CSV (header row of column names) or NPZ (one 1-D array per
column, named by its key) file read by the strict reader (:mod:`ilnrun.datasets.reader`);
``features`` is ``all`` (every column but the target), a comma-separated string of column names
or a YAML list of them; split, standardized, centred and scaled as every table
(:mod:`ilnrun.datasets.tables`). Problems with the file (missing, unreadable, missing or
non-numeric columns, NaNs, too few rows) raise :class:`DataError` naming the dataset key. The
file is identified by its content (SHA-256, recorded under the config's ``inputs``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import DataError, Dataset, DatasetSpec, T_param, declared, param
from .reader import read_table
from .tables import TABLE_CHOICES, TABLE_SPLIT_PARAMS, table_dataset, what_is_used

PARAMS = (
    param(
        "path",
        "path",
        None,
        "a .csv (header row of names) or .npz (one 1-D array per column) file; a "
        "relative path is relative to the config file's folder (required)",
        special=(None,),
    ),
    param("target", "str", None, "the label column (required)", special=(None,)),
    param(
        "features",
        "strlist",
        "all",
        "'all' (every column but the target), comma-separated column names, or a "
        "list of column names",
    ),
    T_param(200, "training rows (one online pass)"),
    *TABLE_SPLIT_PARAMS,
)


@declared(PARAMS)
def file(
    rng: np.random.Generator,
    *,
    path: str,
    target: str,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
    center: bool,
) -> Dataset:
    """A CSV / NPZ file; see the module docstring for every choice."""
    sizes = (T, n_val, n_test)
    return table_dataset(rng, read_table(path), target, features, sizes, standardize, center)


def check_file(spec: dict) -> dict:
    if spec["path"] is None:
        raise DataError("path", "is required: a .csv or .npz file")
    if spec["target"] is None:
        raise DataError("target", "is required: the name of the label column")
    return what_is_used(read_table(spec["path"]), spec, spec["target"])


def example_table(folder: Path) -> dict:
    """A 120-row CSV (three features, one target) written into ``folder``."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(120)
    path = Path(folder) / "example.csv"
    rows = ["a,b,c,y"] + [",".join(f"{v:.6f}" for v in (*x, t)) for x, t in zip(X, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return {"path": str(path), "target": "y", "T": 40, "n_val": 30}


SPEC = DatasetSpec(
    name="file",
    build=file,
    summary="your own data: a CSV (header row) or NPZ file, one row per example",
    example=example_table,
    params=PARAMS,
    choices=TABLE_CHOICES,
    check=check_file,
)
