"""``digits``: scikit-learn's shipped handwritten digits (1,797 images of 8×8 pixels, grey
levels 0–16, ten classes of about 180 images; the UCI optical-recognition test set), loaded
without a download, as a binary task: ``classes: [8, 6]`` keeps the images of those two digits,
the first ``+1`` and the second ``-1`` (Dai et al.'s MNIST 8 vs 6 task, §7.2, in small). The
64 pixel columns ``pixel_<row>_<col>`` are the features; splits and standardization are those
of every table kind, labels exactly ``±1`` (:mod:`ilnrun.datasets.classes`)."""

from __future__ import annotations

import importlib.util

import numpy as np

from .base import DataError, Dataset, DatasetSpec, declared, param
from .classes import (
    CLASS_TABLE_CHOICES,
    PM1,
    class_split_params,
    classes_param,
    enough_rows,
    pm1_dataset,
    pm1_table,
)
from .reader import Table
from .shipped import bundled
from .tables import table_identity, what_is_used

DIGITS_INSTALL = "pip install scikit-learn"
TARGET = "digit"
SOURCE = "scikit-learn's handwritten digits"


def digits_table() -> Table:
    """scikit-learn's digits: the 64 pixel columns and ``digit`` (0–9), raw grey levels. Read
    from scikit-learn's data file as ``load_digits`` reads it (:mod:`ilnrun.datasets.shipped`:
    the same arrays, without importing scikit-learn), else by ``load_digits`` itself."""
    if importlib.util.find_spec("sklearn") is None:
        raise DataError(
            "kind",
            f"the 'digits' dataset needs scikit-learn, which is not installed: {DIGITS_INSTALL}",
        )
    data = bundled("digits.csv.gz", 65, delimiter=",")
    if data is not None:  # load_digits: the last column is the digit, the others the pixels
        target = data[:, -1].astype(int, copy=False)
        pixels = data[:, :-1]
        names = [f"pixel_{row}_{col}" for row in range(8) for col in range(8)]
    else:
        from sklearn.datasets import load_digits

        b = load_digits()
        target, pixels, names = b.target, b.data, b.feature_names
    table = {name: pixels[:, i] for i, name in enumerate(names)}
    table[TARGET] = target.astype(float)
    return table


def digits_pm1(classes: list | None) -> tuple[Table, Table]:
    """The raw table and the rows of the two ``classes`` with their ``±1`` labels."""
    raw = digits_table()
    pixels = {k: v for k, v in raw.items() if k != TARGET}
    return raw, pm1_table(pixels, raw[TARGET], classes, TARGET, SOURCE)


PARAMS = (
    classes_param([8, 6], "two of the digits 0-9; default 8 vs 6, Dai et al.'s task"),
    param(
        "features",
        "strlist",
        "all",
        "'all' (the 64 pixels), comma-separated names or a list of names among "
        "pixel_0_0 .. pixel_7_7",
    ),
    *class_split_params(200, 50, "355 rows of digits 8 and 6"),
)


@declared(PARAMS)
def digits(
    rng: np.random.Generator,
    *,
    classes: list,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
) -> Dataset:
    """Two digits of scikit-learn's digits, ``±1`` labels; see the module docstring."""
    _, table = digits_pm1(classes)
    return pm1_dataset(rng, table, TARGET, features, (T, n_val, n_test), standardize, classes)


def check_digits(spec: dict) -> dict:
    raw, table = digits_pm1(spec["classes"])
    enough_rows(table, TARGET, spec, spec["classes"])
    return {
        **what_is_used(table, spec, TARGET),
        "inputs": {"digits:scikit-learn": table_identity(SOURCE, raw)},
    }


SPEC = DatasetSpec(
    name="digits",
    build=digits,
    summary="scikit-learn's handwritten digits (8x8 pixels) as a binary task, two digits "
    "(default 8 vs 6) labelled +1 / -1",
    example=lambda folder: {"T": 60, "n_val": 30, "n_test": 40},
    params=PARAMS,
    choices=(
        "Data: scikit-learn's shipped handwritten digits (the UCI optical-recognition set's "
        "test part: 1,797 images of 8×8 pixels, grey levels 0–16, about 180 per digit); no "
        "download. The images of the two digits in `classes` are kept (default 8 vs 6: "
        "355 images, Dai et al.'s MNIST 8-vs-6 task in small); the 64 pixels are the features.",
        *CLASS_TABLE_CHOICES,
    ),
    check=check_digits,
    labels=PM1,
)
