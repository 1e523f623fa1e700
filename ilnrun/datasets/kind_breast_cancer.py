"""``breast_cancer``: scikit-learn's shipped Wisconsin diagnostic breast-cancer table (569
tumours, 30 real features of cell nuclei computed from a digitized image; 212 malignant, 357
benign), loaded without a download, as a binary task: by default **malignant is +1** and benign
``-1`` (``classes: [malignant, benign]``; ``[benign, malignant]`` swaps them). Splits and
standardization are those of every table kind, labels exactly ``±1``
(:mod:`ilnrun.datasets.classes`)."""

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
from .tables import table_identity, what_is_used

BREAST_CANCER_INSTALL = "pip install scikit-learn"
TARGET = "diagnosis"
SOURCE = "scikit-learn's breast-cancer data"


def breast_cancer_table() -> tuple[Table, np.ndarray]:
    """The 30 feature columns (raw values) and the diagnosis of each row, as text
    (``malignant`` / ``benign``); the table's identity hashes the features and the 0/1 codes."""
    if importlib.util.find_spec("sklearn") is None:
        raise DataError(
            "kind",
            f"the 'breast_cancer' dataset needs scikit-learn, which is not installed: "
            f"{BREAST_CANCER_INSTALL}",
        )
    from sklearn.datasets import load_breast_cancer

    b = load_breast_cancer()
    table = {str(name): b.data[:, i] for i, name in enumerate(b.feature_names)}
    table[TARGET] = b.target.astype(float)  # scikit-learn's codes: 0 malignant, 1 benign
    return table, np.asarray(b.target_names)[b.target]


def breast_cancer_pm1(classes: list | None) -> tuple[Table, Table]:
    """The raw table and the rows of the two ``classes`` with their ``±1`` labels."""
    raw, diagnosis = breast_cancer_table()
    features = {k: v for k, v in raw.items() if k != TARGET}
    return raw, pm1_table(features, diagnosis, classes, TARGET, SOURCE)


PARAMS = (
    classes_param(["malignant", "benign"], "malignant and benign; default malignant +1"),
    param(
        "features",
        "strlist",
        "all",
        "'all' (the 30 features), comma-separated names or a list of names ('mean radius', "
        "'mean texture', ..., 'worst fractal dimension')",
    ),
    *class_split_params(200, 100, "569 rows"),
)


@declared(PARAMS)
def breast_cancer(
    rng: np.random.Generator,
    *,
    classes: list,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
) -> Dataset:
    """The breast-cancer table, ``±1`` labels; see the module docstring."""
    _, table = breast_cancer_pm1(classes)
    return pm1_dataset(rng, table, TARGET, features, (T, n_val, n_test), standardize, classes)


def check_breast_cancer(spec: dict) -> dict:
    raw, table = breast_cancer_pm1(spec["classes"])
    enough_rows(table, TARGET, spec, spec["classes"])
    return {
        **what_is_used(table, spec, TARGET),
        "inputs": {"breast_cancer:scikit-learn": table_identity(SOURCE, raw)},
    }


SPEC = DatasetSpec(
    name="breast_cancer",
    build=breast_cancer,
    summary="scikit-learn's breast-cancer table (569 rows, 30 features), malignant +1 / benign -1",
    example=lambda folder: {"T": 60, "n_val": 30, "n_test": 40},
    params=PARAMS,
    choices=(
        "Data: scikit-learn's shipped Wisconsin diagnostic breast-cancer table (Street, "
        "Wolberg & Mangasarian 1993): 569 tumours, 30 real features of the cell nuclei of a "
        "fine-needle aspirate's image; no download. Label: the diagnosis, malignant (212) "
        "`+1` and benign (357) `-1` by default (`classes: [malignant, benign]`).",
        *CLASS_TABLE_CHOICES,
    ),
    check=check_breast_cancer,
    labels=PM1,
)
