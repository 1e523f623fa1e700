"""``openml_binary``: a public OpenML data set by name (:mod:`.kind_openml`: the same cached
``fetch_openml``, the same rows and feature columns) as a binary classification task: the rows
of the two ``classes`` of its label column, the first ``+1`` and the second ``-1``, split and
standardized like every table kind with labels exactly ``±1`` (:mod:`.classes`). The label
column may be nominal (OpenML's classification targets: ``adult``'s ``>50K`` / ``<=50K``,
``mnist_784``'s digits ``'0'``–``'9'``) or numeric; a class is compared as text with a nominal
column and as a number with a numeric one, so ``classes: [8, 6]`` names two of mnist_784's
digits. The table used (the two classes' rows, their feature columns and ``±1`` labels) is
identified by its content under the config's ``inputs``."""

from __future__ import annotations

import numpy as np

from ..params import show
from .base import DataError, Dataset, DatasetSpec, declared
from .classes import (
    CLASS_TABLE_CHOICES,
    PM1,
    class_split_params,
    classes_param,
    enough_rows,
    pm1_dataset,
    pm1_table,
    two_classes,
)
from .kind_openml import PARAMS as OPENML_PARAMS
from .kind_openml import SPEC as OPENML
from .kind_openml import openml_frame, openml_target
from .reader import Table
from .tables import frame_table, table_identity, what_is_used

_SHARED = {p.name: p for p in OPENML_PARAMS}

PARAMS = (
    *(_SHARED[k] for k in ("name", "version", "data_home", "target")),
    classes_param(None, "required: two labels of the target column, e.g. ['>50K', '<=50K']"),
    _SHARED["features"],
    *class_split_params(200, 100, "drawn from the two classes' rows"),
)


def openml_pm1(
    name: str | None, version: int, data_home: str | None, target: str | None, classes
) -> tuple[Table, str]:
    """The rows of the two ``classes`` of an OpenML data set (cached fetch): its numeric and
    ordered categorical feature columns (:func:`frame_table`) and ``±1`` labels under the
    target's name; and that name."""
    if name is None:
        raise DataError("name", "is required: the OpenML data set's name")
    two_classes(classes)  # before a fetch that may download
    frame, default = openml_frame(name, version, data_home)
    target = openml_target(target, default)
    if target not in frame.columns:
        raise DataError(
            "target",
            f"column {show(target, 80)} not found among the data set's {len(frame.columns)} "
            "columns",
        )
    where = f"OpenML data set {name!r} column {target!r}"
    features = frame_table(frame.drop(columns=[target]), f"OpenML data set {name!r}")
    column = frame[target]
    labels = (
        column.to_numpy(dtype=float)
        if column.dtype.kind in "iuf"
        else column.astype(str).to_numpy(dtype=object)
    )
    return pm1_table(features, labels, classes, target, where), target


@declared(PARAMS)
def openml_binary(
    rng: np.random.Generator,
    *,
    name: str | None,
    version: int,
    data_home: str | None,
    target: str | None,
    classes: list | None,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
) -> Dataset:
    """Two classes of an OpenML data set (cached fetch), ``±1`` labels."""
    table, target = openml_pm1(name, version, data_home, target, classes)
    sizes = (T, n_val, n_test)
    return pm1_dataset(rng, table, target, features, sizes, standardize, list(classes or ()))


def check_openml_binary(spec: dict) -> dict:
    table, target = openml_pm1(
        spec["name"], spec["version"], spec["data_home"], spec["target"], spec["classes"]
    )
    enough_rows(table, target, spec, spec["classes"])
    c = spec["classes"]
    key = f"openml:{spec['name']}@{spec['version']}"
    source = (
        f"OpenML data set {spec['name']} version {spec['version']}, target {target}: classes "
        f"{c[0]!r} (+1) and {c[1]!r} (-1)"
    )
    return {**what_is_used(table, spec, target), "inputs": {key: table_identity(source, table)}}


SPEC = DatasetSpec(
    name="openml_binary",
    build=openml_binary,
    example=None,
    summary="two classes of a public OpenML data set by name (e.g. adult, mnist_784), "
    "labelled +1 / -1, through scikit-learn's fetch_openml, cached on disk (the first use "
    "needs network access)",
    params=PARAMS,
    choices=(
        OPENML.choices[0],
        "Rows with a missing value are dropped; numeric feature columns are used as they are; "
        "ordered categorical ones become their codes; other feature columns (unordered "
        "categories, text) are left out. The label column may be nominal or numeric: a "
        "class is matched as text in a nominal column, as a number in a numeric one.",
        *CLASS_TABLE_CHOICES,
    ),
    check=check_openml_binary,
    labels=PM1,
)
