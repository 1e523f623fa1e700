"""``plotnine``: a table the plotnine package ships (``plotnine.data``; ggplot2's ``diamonds``,
53 940 rows, and others), loaded by name without a download, ordered categorical columns as
their codes (:func:`~ilnrun.datasets.tables.frame_table`), optionally ``ln(target)``, and
handled exactly like ``file``. The table read is identified by its content (recorded under the
config's ``inputs``): a table that changed between a run and its resume is a changed config."""

from __future__ import annotations

import importlib.util

import numpy as np

from .base import DataError, Dataset, DatasetSpec, declared, param
from .reader import Table
from .tables import (
    LABELLED_TABLE_PARAMS,
    TABLE_CHOICES,
    frame_table,
    table_dataset,
    table_identity,
    what_is_used,
    with_log_target,
)

PLOTNINE_INSTALL = "pip install 'ilnrun[real]'"


def plotnine_table(name: str) -> Table:
    """A table shipped inside the ``plotnine`` package (ggplot2's example data: ``diamonds``,
    53 940 rows; ``txhousing``, ``midwest``, ``mpg``, ...), loaded by ``plotnine.data`` without
    a download; see :func:`frame_table` for the columns kept."""
    if importlib.util.find_spec("plotnine") is None:
        raise DataError(
            "kind",
            f"the 'plotnine' dataset kind needs plotnine, which is not installed: "
            f"{PLOTNINE_INSTALL}",
        )
    import pandas as pd
    import plotnine.data as shipped

    frame = getattr(shipped, name, None) if not name.startswith("_") else None
    if not isinstance(frame, pd.DataFrame):
        tables = sorted(n for n in dir(shipped) if isinstance(getattr(shipped, n), pd.DataFrame))
        raise DataError("name", f"plotnine ships no table {name!r} (tables: {', '.join(tables)})")
    return frame_table(frame.dropna(), f"plotnine table {name!r}")


PARAMS = (
    param(
        "name",
        "str",
        "diamonds",
        "the table, an attribute of plotnine.data (diamonds, txhousing, mpg, ...)",
    ),
    param("target", "str", "price", "the label column"),
    *LABELLED_TABLE_PARAMS,
)


@declared(PARAMS)
def plotnine(
    rng: np.random.Generator,
    *,
    name: str,
    target: str,
    log_target: bool,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
    center: bool,
) -> Dataset:
    """A table plotnine ships, split and scaled exactly like ``file`` (module docstring); with
    ``log_target`` the label is ``ln(target)`` (positive targets only)."""
    table = with_log_target(plotnine_table(name), target, log_target)
    return table_dataset(rng, table, target, features, (T, n_val, n_test), standardize, center)


def check_plotnine(spec: dict) -> dict:
    raw = plotnine_table(spec["name"])
    table = with_log_target(raw, spec["target"], spec["log_target"])
    source = f"plotnine table {spec['name']}"
    return {
        **what_is_used(table, spec, spec["target"]),
        "inputs": {f"plotnine:{spec['name']}": table_identity(source, raw)},
    }


SPEC = DatasetSpec(
    name="plotnine",
    build=plotnine,
    summary="a table the plotnine package ships, by name (ggplot2's diamonds: 53,940 "
    "rows; extra 'real')",
    example=lambda folder: {"name": "mpg", "target": "hwy", "T": 60, "n_val": 40},
    params=PARAMS,
    choices=(
        "Data: a table shipped inside the `plotnine` package (`plotnine.data`, ggplot2's "
        "example data), loaded without a download (`pip install 'ilnrun[real]'`). "
        "`diamonds` (Wickham, ggplot2): 53,940 diamonds, price in US dollars with carat, "
        "cut, color, clarity, depth, table and the dimensions x, y, z.",
        "Rows with a missing value are dropped; numeric columns are used as they are; "
        "ordered categorical columns (diamonds' cut, color, clarity) become their "
        "category codes 0, 1, ... in the declared order; other columns are left out.",
        "With `log_target: true` the label is `ln(target)` (for diamonds the usual "
        "choice: prices are right-skewed, 326–18,823).",
        *TABLE_CHOICES,
    ),
    check=check_plotnine,
)
