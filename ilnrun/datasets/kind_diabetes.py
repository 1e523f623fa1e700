"""``diabetes``: scikit-learn's bundled diabetes data (442 patients, 10 raw baseline variables,
target a measure of disease progression one year later; Efron et al. 2004), loaded without a
download (scikit-learn, a dependency of ilnrun) and handled exactly like ``file``
(:mod:`ilnrun.datasets.tables`); its content is recorded under the config's ``inputs``."""

from __future__ import annotations

import importlib.util

import numpy as np

from .base import DataError, Dataset, DatasetSpec, T_param, declared, param
from .reader import Table
from .shipped import bundled
from .tables import (
    TABLE_CHOICES,
    TABLE_SPLIT_PARAMS,
    table_dataset,
    table_identity,
    what_is_used,
)

DIABETES_INSTALL = "pip install scikit-learn"


# load_diabetes's feature names, in the order of its data file's columns
FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")


def diabetes_table() -> Table:
    """scikit-learn's bundled diabetes data, raw (unscaled) values; ``target`` is the label.
    Read from scikit-learn's data files as ``load_diabetes(scaled=False)`` reads them
    (:mod:`ilnrun.datasets.shipped`: the same arrays, without importing scikit-learn), else by
    ``load_diabetes`` itself."""
    if importlib.util.find_spec("sklearn") is None:
        raise DataError(
            "kind",
            f"the 'diabetes' dataset needs scikit-learn, which is not installed: "
            f"{DIABETES_INSTALL}",
        )
    data = bundled("diabetes_data_raw.csv.gz", len(FEATURES))
    target = bundled("diabetes_target.csv.gz", 1) if data is not None else None
    if target is not None and len(target) == len(data):
        names = FEATURES
    else:
        from sklearn.datasets import load_diabetes

        b = load_diabetes(scaled=False)
        data, target, names = b.data, b.target, b.feature_names
    table = {name: data[:, i] for i, name in enumerate(names)}
    table["target"] = target
    return table


PARAMS = (
    param(
        "features",
        "strlist",
        "all",
        "'all', comma-separated names or a list of names among age, sex, bmi, bp, s1..s6",
    ),
    T_param(200, "training rows (one online pass; 442 rows in all)"),
    *TABLE_SPLIT_PARAMS,
)


@declared(PARAMS)
def diabetes(
    rng: np.random.Generator,
    *,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
    center: bool,
) -> Dataset:
    """scikit-learn's diabetes data (442 rows, 10 features); see the module docstring."""
    sizes = (T, n_val, n_test)
    return table_dataset(rng, diabetes_table(), "target", features, sizes, standardize, center)


def check_diabetes(spec: dict) -> dict:
    table = diabetes_table()
    source = "scikit-learn's diabetes data"
    return {
        **what_is_used(table, spec, "target"),
        "inputs": {"diabetes:scikit-learn": table_identity(source, table)},
    }


SPEC = DatasetSpec(
    name="diabetes",
    build=diabetes,
    summary="scikit-learn's bundled diabetes data (442 rows, 10 features; extra 'real')",
    example=lambda folder: {"T": 50, "n_val": 40},
    params=PARAMS,
    choices=(
        "Data: scikit-learn's bundled diabetes set (Efron et al. 2004): 442 patients, "
        "10 raw baseline variables (age, sex, bmi, bp, s1–s6), target a quantitative "
        "measure of disease progression one year later; no download "
        "(scikit-learn ships it).",
        *TABLE_CHOICES,
    ),
    check=check_diabetes,
)
