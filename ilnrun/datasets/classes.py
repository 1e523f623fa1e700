"""What the binary classification kinds share (``DatasetSpec.labels == "pm1"``): the
``classes`` parameter, a label column turned into ``±1`` labels (the first class listed
``+1``, the second ``-1``; rows of every other class left out), the checks a setting must pass
at validation (two distinct classes, both present in the data, enough rows of them for the
splits) and the splitting of such a table.

Labels are exactly ``+1`` or ``-1`` in every split: the table is shuffled, split and
standardized like every table kind (:func:`ilnrun.datasets.tables.tabular`), never centered,
and the one label factor ``1 / max |y_train|`` (:func:`~ilnrun.datasets.base.scale_labels`)
is then ``1``, the identity. More than two classes are refused, naming ``dataset.classes``:
one-vs-rest would be several binary tasks, i.e. several experiments (docs/protocol.md §2.9).
"""

from __future__ import annotations

import numpy as np

from ..params import Param, show
from .base import DataError, Dataset, T_param, param
from .reader import Table
from .tables import TABLE_CHOICES, TABLE_SPLIT_PARAMS, split_sizes, table_dataset

PM1 = "pm1"  # DatasetSpec.labels of the classification kinds

# a class list shows at most this many of a column's distinct values in a message
SHOWN_CLASSES = 20


def classes_param(default: list | None, doc: str) -> Param:
    """``classes``: the two labels kept, as one value (never an axis); ``None`` = required."""
    return param(
        "classes",
        "classlist",
        default,
        f"the two class labels kept, the first +1 and the second -1 ({doc})",
        special=(None,) if default is None else (),
    )


def class_split_params(T: int, n_val: int, rows: str) -> tuple[Param, ...]:
    """``T``, ``n_val``, ``n_test`` and ``standardize`` of a classification table (``rows``: the
    rows of the default classes, for the documentation); no ``center``: labels stay ``±1``."""
    shared = {p.name: p for p in TABLE_SPLIT_PARAMS}
    return (
        T_param(T, f"training rows (one online pass; {rows})"),
        param("n_val", "int", n_val, "validation rows", min=1),
        shared["n_test"],
        shared["standardize"],
    )


CLASS_TABLE_CHOICES = (
    TABLE_CHOICES[0],
    "With `standardize: true` each feature is centered and scaled by the mean and standard "
    "deviation of the training rows only (a constant column is only centered).",
    "Labels: the rows of the two classes in `classes` are kept, the first class `+1` and the "
    "second `-1`; labels are never centered, and the one label factor `1 / max_i |y_i|` is 1, "
    "so every label of every split is exactly `+1` or `-1`. More than two classes are refused "
    "(no one-vs-rest).",
)


def _labels(column: np.ndarray) -> tuple[np.ndarray, bool]:
    """The column's labels as compared with ``classes``: numbers (a numeric column) or text."""
    if column.dtype.kind in "iuf":
        return column.astype(float), True
    return np.asarray([str(v) for v in column], dtype=object), False


def _key(c: int | str, numeric: bool) -> float | str | None:
    """A configured class as the column's labels are compared: ``None`` if it cannot be one."""
    if not numeric:
        return str(c)
    try:
        return float(c)
    except ValueError:
        return None


def _shown(values: np.ndarray, numeric: bool) -> str:
    distinct = np.unique(values)
    if len(distinct) > SHOWN_CLASSES:
        return f"{len(distinct)} distinct values"
    shown = [f"{v:g}" if numeric else str(v) for v in distinct]
    return show(shown, 200)


def two_classes(classes: list | None) -> list:
    """``classes`` as given, if it names two classes (checked before any data is read: an
    OpenML data set is not fetched for a setting that cannot be built); else a
    :class:`DataError` naming ``classes``. Whether they are distinct and present is known only
    with the data (:func:`pm1_labels`)."""
    if classes is None:
        raise DataError("classes", "is required: the two class labels kept (first +1, second -1)")
    if len(classes) != 2:
        raise DataError(
            "classes",
            f"must name exactly two classes (the first +1, the second -1), got {len(classes)}: "
            f"{show(classes)}; more than two classes are refused (no one-vs-rest: run one "
            "experiment per pair)",
        )
    if str(classes[0]) == str(classes[1]):
        raise DataError("classes", f"must name two distinct classes, got {show(classes)}")
    return classes


def pm1_labels(column: np.ndarray, classes: list | None, where: str) -> tuple[np.ndarray, ...]:
    """``(rows kept, their ±1 labels)`` of a label column: the rows of the two ``classes`` (the
    first ``+1``, the second ``-1``). A missing, malformed or absent class is a
    :class:`DataError` naming ``classes``, with the classes the column has (``where`` names
    the data in messages)."""
    two_classes(classes)
    labels, numeric = _labels(np.asarray(column))
    keys = [_key(c, numeric) for c in classes]
    if keys[0] is not None and keys[0] == keys[1]:
        raise DataError("classes", f"must name two distinct classes, got {show(classes)}")
    present = set(labels.tolist())
    absent = [c for c, k in zip(classes, keys, strict=True) if k is None or k not in present]
    if absent:
        raise DataError(
            "classes",
            f"class(es) {show(absent)} not found in {where} (its classes: "
            f"{_shown(labels, numeric)})",
        )
    positive, negative = labels == keys[0], labels == keys[1]
    keep = positive | negative
    return keep, np.where(positive[keep], 1.0, -1.0)


def pm1_table(
    features: Table, column: np.ndarray, classes: list | None, target: str, where: str
) -> Table:
    """The rows of the two ``classes``: the ``features`` columns and ``target`` their ``±1``
    labels (:func:`pm1_labels`)."""
    keep, y = pm1_labels(column, classes, where)
    return {**{name: np.asarray(v)[keep] for name, v in features.items()}, target: y}


def enough_rows(table: Table, target: str, spec: dict, classes: list) -> None:
    """Rows of the two classes for ``T + n_val`` and the test split; else a DataError naming
    ``T`` that says how many rows the classes have."""
    try:
        split_sizes(len(table[target]), spec["T"], spec["n_val"], spec["n_test"])
    except DataError as exc:
        raise DataError(
            "T", f"{exc.message}; counted over the rows of classes {show(classes)} only"
        ) from None


def pm1_dataset(
    rng: np.random.Generator,
    table: Table,
    target: str,
    features: str | list[str],
    sizes: tuple[int, int, int | str],
    standardize: bool,
    classes: list,
) -> Dataset:
    """A table with ``±1`` labels under ``target`` split like every table (never centered);
    ``info`` adds the classes and each split's fraction of ``+1`` labels."""
    d = table_dataset(rng, table, target, features, sizes, standardize, center=False)
    d.info["classes"] = {"+1": classes[0], "-1": classes[1]}
    d.info["positive_fraction"] = {
        name: float(np.mean(d.split(name)[1] > 0)) for name in ("train", "val", "test")
    }
    return d
