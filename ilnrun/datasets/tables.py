"""From a table (column name -> 1-D array) to the splits: the columns a setting uses, numeric
checks, split sizes, the shuffle, standardization and centering with training statistics, and
the parameters and report sentences every table kind shares (file, diabetes, plotnine, openml).

Rows are shuffled with the dataset rng and split into ``T`` training, ``n_val`` validation and
``n_test`` test rows (``rest``: every remaining row). With ``standardize`` each feature column is
centered and scaled by the mean and standard deviation of the **training** rows (a constant
column is only centered); with ``center`` the target's training mean is subtracted from every
split (the learners have no bias term and start at ``f = 0``). Then labels are scaled by
``1 / max |y_train|`` (:func:`~ilnrun.datasets.base.scale_labels`). Values beyond ``1e150`` in
magnitude, NaNs and non-numeric values are refused naming the column and row, never the value.

A table read by name (plotnine, openml, diabetes) is identified by its content
(:func:`table_identity`), recorded under the config's ``inputs`` like a file's SHA-256: data
that changed between a run and its resume make a different config.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..params import show
from .base import DataError, Dataset, T_param, param, scale_labels, splits
from .reader import Table

MAX_ABS_VALUE = 1e150  # beyond this, squares and products in the learners overflow float64


def feature_names(features: str | list[str], target: str, columns: list[str]) -> list[str]:
    """``all`` (every column but the target), the comma-separated names, or a list of column
    names (a YAML list under ``features``), checked."""
    if isinstance(features, (list, tuple)):
        if not all(isinstance(f, str) for f in features):
            raise DataError("features", "a list of features must hold column names (strings)")
        names = [f.strip() for f in features]
        shown = ", ".join(map(repr, names))
    elif features.strip() == "all":
        names = [c for c in columns if c != target]
        shown = ""
    else:
        names = [f.strip() for f in features.split(",")]
        shown = repr(features)
    if shown:
        if any(not f for f in names):
            raise DataError("features", f"empty column name in {shown}")
        if len(set(names)) != len(names):
            raise DataError("features", f"repeated column names in {shown}")
        if target in names:
            raise DataError("features", f"the target column {target!r} cannot be a feature")
    missing = [f for f in names if f not in columns]
    if missing:
        raise DataError(
            "features",
            f"column(s) {show(missing, 200)} not found among the file's {len(columns)} "
            "columns (the file's content is not printed)",
        )
    if not names:
        raise DataError("features", "no feature columns")
    return names


def numeric_column(v: np.ndarray, name: str, key: str) -> np.ndarray:
    """``v`` as float64; non-numeric values, NaNs, infinities and magnitudes beyond
    :data:`MAX_ABS_VALUE` raise naming the column and the row (never the value)."""
    if v.dtype.kind in "biuf":
        x = v.astype(float)
    else:
        x = np.empty(len(v))
        for i, s in enumerate(v):
            try:
                x[i] = float(s)
            except (TypeError, ValueError, OverflowError):
                raise DataError(
                    key, f"column {name!r} is not numeric: data row {i} (0-based) is not a number"
                ) from None
    bad = ~np.isfinite(x)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        what = "missing (NaN)" if np.isnan(x[first]) else "infinite"
        raise DataError(
            key,
            f"column {name!r} has {int(bad.sum())} missing or infinite value(s); "
            f"first at data row {first} (0-based, header not counted): {what}",
        )
    huge = np.abs(x) > MAX_ABS_VALUE
    if huge.any():
        raise DataError(
            key,
            f"column {name!r} has {int(huge.sum())} value(s) beyond +-{MAX_ABS_VALUE:g} (first "
            f"at data row {int(np.flatnonzero(huge)[0])}, 0-based); the learners' float64 "
            f"arithmetic overflows there - rescale the column",
        )
    return x


def split_sizes(n: int, T: int, n_val: int, n_test: int | str) -> tuple[int, int, int]:
    """``(T, n_val, n_test)`` for a table of ``n`` rows; raises when there are too few."""
    rest = n - T - n_val
    if n_test == "rest":
        if rest < 1:
            raise DataError(
                "T",
                f"too few rows: T + n_val = {T + n_val} leaves no test row (the data has {n})",
            )
        return T, n_val, rest
    if rest < n_test:
        raise DataError(
            "T",
            f"too few rows: T + n_val + n_test = {T + n_val + n_test} but the data has {n}",
        )
    return T, n_val, int(n_test)


def table_arrays(
    table: Table, features: str | list[str], target: str, T: int, n_val: int, n_test: int | str
) -> tuple[np.ndarray, np.ndarray, list[str], tuple[int, int, int]]:
    """``(X, y, feature names, split sizes)`` from a table, every problem a DataError."""
    columns = list(table)
    if target not in columns:
        raise DataError(
            "target",
            f"column {show(target, 80)} not found among the file's {len(columns)} columns "
            "(the file's content is not printed)",
        )
    names = feature_names(features, target, columns)
    X = np.column_stack([numeric_column(table[f], f, "features") for f in names])
    y = numeric_column(table[target], target, "target")
    sizes = split_sizes(len(y), T, n_val, n_test)
    return X, y, names, sizes


def table_dataset(
    rng: np.random.Generator,
    table: Table,
    target: str,
    features: str | list[str],
    sizes: tuple[int, int, int | str],
    standardize: bool,
    center: bool,
) -> Dataset:
    """A labelled table as a dataset: its arrays (:func:`table_arrays`, ``sizes`` the
    ``(T, n_val, n_test)`` asked for), shuffled, split and scaled (:func:`tabular`); ``info``
    names the feature columns used."""
    X, y, names, used = table_arrays(table, features, target, *sizes)
    return tabular(rng, X, y, used, standardize, center, {"features": names})


def tabular(
    rng: np.random.Generator,
    X: np.ndarray,
    y: np.ndarray,
    sizes: tuple[int, int, int],
    standardize: bool,
    center: bool,
    info: dict,
) -> Dataset:
    """Shuffle with ``rng``, split, standardize / center with training statistics, scale."""
    T, n_val, n_test = sizes
    order = rng.permutation(len(y))[: T + n_val + n_test]
    X, y = X[order], y[order]
    if standardize:
        mean, std = X[:T].mean(axis=0), X[:T].std(axis=0)
        X = (X - mean) / np.where(std > 0, std, 1.0)
    if center:
        y = y - y[:T].mean()
    y, label_scale = scale_labels(y, T)
    X = np.ascontiguousarray(X)
    info = {**info, "label_scale": label_scale, "rows": order.tolist()}
    return splits(X, y, T, n_val, info)


def frame_table(frame, where: str) -> Table:
    """Columns of a pandas DataFrame as a table: numeric columns as they are, an **ordered**
    categorical column as its category codes in the declared order (e.g. diamonds' ``cut``:
    Fair < Good < Very Good < Premium < Ideal -> 0..4); any other column is left out (listed
    in :class:`DataError` messages only when asked for as a feature or target)."""
    import pandas as pd

    table: Table = {}
    for name in frame.columns:
        col = frame[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            if col.cat.ordered and (col.cat.codes >= 0).all():
                table[str(name)] = col.cat.codes.to_numpy(dtype=float)
        elif pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            table[str(name)] = col.to_numpy(dtype=float)
    if not table:
        raise DataError("name", f"{where} has no numeric or ordered categorical column")
    return table


def with_log_target(table: Table, target: str, log_target: bool) -> Table:
    if not log_target or target not in table:
        return table
    if not (table[target] > 0).all():
        raise DataError("log_target", f"column {target!r} has values <= 0: no logarithm")
    return {**table, target: np.log(table[target])}


def what_is_used(table: Table, spec: dict, target: str) -> dict:
    """The columns, rows and split sizes a table setting uses (every problem a DataError)."""
    _, y, names, (T, n_val, n_test) = table_arrays(
        table, spec["features"], target, spec["T"], spec["n_val"], spec["n_test"]
    )
    return {
        "rows": len(y),
        "target": target,
        "features": names,
        "splits": {"train": T, "val": n_val, "test": n_test},
    }


def table_identity(source: str, table: Table) -> dict:
    """The content identity of a table read by name: SHA-256 over each column's name, dtype,
    length and bytes in order (``source`` says what was read; ``bytes`` the numbers hashed)."""
    h, size = hashlib.sha256(), 0
    for name, v in table.items():
        a = np.ascontiguousarray(v)
        h.update(f"{name}\0{a.dtype.str}\0{len(a)}\0".encode())
        h.update(memoryview(a).cast("B"))
        size += a.nbytes
    return {"source": source, "sha256": h.hexdigest(), "bytes": size}


# Splits and scaling shared by the datasets read from tables (file, diabetes).
TABLE_SPLIT_PARAMS = (
    param("n_val", "int", 100, "validation rows", min=1),
    param(
        "n_test",
        "int",
        "rest",
        "test rows, or 'rest' (all remaining rows)",
        min=1,
        special=("rest",),
    ),
    param("standardize", "bool", True, "z-score features with training-split statistics"),
    param("center", "bool", True, "subtract the training-split mean of the target"),
)
# The label transform, columns and splits shared by the tables read by name (plotnine, openml).
LABELLED_TABLE_PARAMS = (
    param("log_target", "bool", False, "use ln(target) as the label"),
    param(
        "features",
        "strlist",
        "all",
        "'all' (every numeric or ordered categorical column but the target), "
        "comma-separated names or a list of names",
    ),
    T_param(200, "training rows (one online pass)"),
    *TABLE_SPLIT_PARAMS,
)
TABLE_CHOICES = (
    "Rows are shuffled with the repetition's dataset seed and split into `T` training, `n_val` "
    "validation and `n_test` test rows (`rest`: all remaining rows), so every repetition is a "
    "different random split.",
    "With `standardize: true` each feature is centered and scaled by the mean and standard "
    "deviation of the training rows only; with `center: true` the training mean of the target "
    "is subtracted from every split (the learners have no bias term and start at `f = 0`, so "
    "the zero predictor is then the training-mean predictor).",
    "Labels are then brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the "
    "training rows and applied to every split (validation and test labels may exceed 1).",
    "The target is whatever the data hold: it need not lie in the RKHS of the feature map, so "
    "the oracle's test loss is the reference for what the feature map can reach, not zero.",
)
