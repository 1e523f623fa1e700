"""Datasets: one module per kind (``kind_<name>.py``: its builder and its declaration, the
:class:`DatasetSpec` whose ``Param``s also give the builder's defaults), the strict table reader
(:mod:`.reader`), what every table kind shares (:mod:`.tables`), the identity of the data read
(:mod:`.identity`) and, here, the registry ``DATASETS`` (docs/architecture.md §6).

Each builder takes the dataset rng first and returns train / validation / test splits drawn from
one distribution, shared by every learner and every hyperparameter setting of a repetition
(docs/protocol.md); labels are scaled by one factor ``1 / max |y_train|`` (:mod:`.base`), the
identity for the classification kinds, whose labels are exactly ``±1`` (``DatasetSpec.labels``
``"pm1"``; :mod:`.classes`).
Problems only the data can reveal raise :class:`DataError` naming the dataset key;
:func:`inspect` returns them as a list so that ``ilnrun validate`` / ``ilnrun run`` report them
before any cell runs.
"""

from __future__ import annotations

import numpy as np

from . import (
    kind_breast_cancer,
    kind_clipped_gaussian,
    kind_diabetes,
    kind_digits,
    kind_file,
    kind_openml,
    kind_openml_binary,
    kind_plotnine,
    kind_teacher,
    kind_teacher_sign,
)
from .base import DataError, Dataset, DatasetSpec, declared
from .identity import by_content, file_identity, resume_views
from .kind_clipped_gaussian import clipped_gaussian
from .kind_diabetes import diabetes, diabetes_table
from .kind_file import file
from .kind_openml import openml, openml_table
from .kind_plotnine import plotnine, plotnine_table
from .kind_teacher import INPUTS, draw_inputs, teacher
from .reader import MAX_TABLE_BYTES, TABLE_SUFFIXES, Table, check_table_file, read_table
from .tables import feature_names, frame_table, split_sizes, table_arrays, table_identity

DATASETS: dict[str, DatasetSpec] = {
    m.SPEC.name: m.SPEC
    for m in (
        kind_clipped_gaussian,
        kind_teacher,
        kind_file,
        kind_diabetes,
        kind_plotnine,
        kind_openml,
        kind_teacher_sign,
        kind_digits,
        kind_breast_cancer,
        kind_openml_binary,
    )
}


def inspect(spec: dict) -> tuple[list[tuple[str, str]], dict | None]:
    """Problems ``(dataset key, message)`` that only the data can reveal (files: existence,
    columns, values, rows; packages), found without building the splits, and what the setting
    uses (``None`` when the dataset does not say, or on a problem), from one read of the data.
    For a table read by name, what it uses includes ``inputs``: the identity of its content."""
    c = DATASETS[spec["kind"]].check
    try:
        return [], c(spec) if c is not None else None
    except DataError as exc:
        return [(exc.key, exc.message)], None


def check(spec: dict) -> list[tuple[str, str]]:
    """The problems of :func:`inspect` alone. Empty if none."""
    return inspect(spec)[0]


def build_dataset(spec: dict, rng: np.random.Generator, feature_map: dict | None = None) -> Dataset:
    """Build one dataset instance from a resolved dataset setting (axes already fixed);
    ``feature_map`` (the resolved ``feature_map`` section) is passed to the datasets that need
    the experiment's kernel."""
    ds = DATASETS[spec["kind"]]
    params = {k: v for k, v in spec.items() if k != "kind"}
    if ds.needs_kernel:
        params["feature_map"] = feature_map
    return ds.build(rng, **params)


__all__ = [
    "DATASETS",
    "INPUTS",
    "MAX_TABLE_BYTES",
    "TABLE_SUFFIXES",
    "DataError",
    "Dataset",
    "DatasetSpec",
    "Table",
    "build_dataset",
    "by_content",
    "check",
    "check_table_file",
    "clipped_gaussian",
    "declared",
    "diabetes",
    "diabetes_table",
    "draw_inputs",
    "feature_names",
    "file",
    "file_identity",
    "frame_table",
    "inspect",
    "openml",
    "openml_table",
    "plotnine",
    "plotnine_table",
    "read_table",
    "resume_views",
    "split_sizes",
    "table_arrays",
    "table_identity",
    "teacher",
]
