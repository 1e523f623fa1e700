"""``openml``: a public OpenML data set by name and version through scikit-learn's
``fetch_openml``, cached on disk under ``data_home`` (the first use needs network access; every
later use reads the cache), ordered categorical columns as their codes, optionally
``ln(target)``, and handled exactly like ``file``. The table read from the cache is identified by
its content (recorded under the config's ``inputs``): a cache that changed between a run and its
resume is a changed config, while a cache moved to another ``data_home`` with the same content
is the same data."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    import pandas as pd

OPENML_INSTALL = "pip install scikit-learn"


def openml_table(name: str, version: int, data_home: str | None) -> tuple[Table, str]:
    """An OpenML data set by name and version (:func:`openml_frame`) as a table (see
    :func:`frame_table` for the columns kept) and the data set's default target column."""
    frame, default = openml_frame(name, version, data_home)
    return frame_table(frame, f"OpenML data set {name!r}"), default


def openml_frame(name: str, version: int, data_home: str | None) -> tuple[pd.DataFrame, str]:
    """An OpenML data set by name and version through scikit-learn's ``fetch_openml``, cached
    under ``data_home`` (scikit-learn's default folder when ``None``): the first call downloads
    it, every later call reads the cache, with no network. Returns its pandas frame without
    the rows that miss a value, and the data set's default target column (``""`` unless it
    has exactly one)."""
    if importlib.util.find_spec("sklearn") is None:
        raise DataError("kind", f"the 'openml' dataset kind needs scikit-learn: {OPENML_INSTALL}")
    import warnings
    from urllib.error import URLError

    from sklearn.datasets import fetch_openml

    home = str(Path(data_home).expanduser()) if data_home is not None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # inactive-version and similar notices
            bunch = fetch_openml(
                name=name, version=version, data_home=home, as_frame=True, parser="pandas"
            )
    except (URLError, OSError) as exc:
        raise DataError(
            "name",
            f"OpenML data set {name!r} (version {version}) is not in the cache "
            f"{home or '(scikit-learn default)'} and could not be downloaded "
            f"({type(exc).__name__}); run once with network access or copy the cache",
        ) from None
    except ValueError as exc:  # unknown name / version, bad checksum, unreadable file
        raise DataError("name", f"OpenML data set {name!r}: {str(exc)[:200]}") from None
    except Exception as exc:  # a damaged cache: fetch_openml's own KeyError, zlib.error, ...
        raise DataError(
            "name",
            f"OpenML data set {name!r}: the cached copy under {home or '(scikit-learn default)'} "
            f"is damaged ({type(exc).__name__}); delete its openml folder and fetch it again",
        ) from None
    targets = list(bunch.target_names or [])
    return bunch.frame.dropna(), (targets[0] if len(targets) == 1 else "")


def openml_target(spec_target: str | None, default: str) -> str:
    target = spec_target or default
    if not target:
        raise DataError("target", "the data set has no single default target: name one")
    return target


PARAMS = (
    param("name", "str", None, "the OpenML data set's name (required)", special=(None,)),
    param(
        "version",
        "int",
        1,
        "the data set's version (OpenML versions never change)",
        min=1,
    ),
    param(
        "data_home",
        "str",
        None,
        "cache folder of fetch_openml (default: scikit-learn's, ~/scikit_learn_data)",
        special=(None,),
    ),
    param(
        "target",
        "str",
        None,
        "the label column (default: the data set's default target)",
        special=(None,),
    ),
    *LABELLED_TABLE_PARAMS,
)


@declared(PARAMS)
def openml(
    rng: np.random.Generator,
    *,
    name: str | None,
    version: int,
    data_home: str | None,
    target: str | None,
    log_target: bool,
    features: str | list[str],
    T: int,
    n_val: int,
    n_test: int | str,
    standardize: bool,
    center: bool,
) -> Dataset:
    """An OpenML data set (cached fetch), split and scaled exactly like ``file``."""
    table, default = openml_table(str(name), version, data_home)
    target = openml_target(target, default)
    table = with_log_target(table, target, log_target)
    return table_dataset(rng, table, target, features, (T, n_val, n_test), standardize, center)


def check_openml(spec: dict) -> dict:
    if spec["name"] is None:
        raise DataError("name", "is required: the OpenML data set's name")
    raw, default = openml_table(spec["name"], spec["version"], spec["data_home"])
    target = openml_target(spec["target"], default)
    table = with_log_target(raw, target, spec["log_target"])
    key = f"openml:{spec['name']}@{spec['version']}"
    source = f"OpenML data set {spec['name']} version {spec['version']} (target {target})"
    return {**what_is_used(table, spec, target), "inputs": {key: table_identity(source, raw)}}


SPEC = DatasetSpec(
    name="openml",
    build=openml,
    example=None,
    summary="a public OpenML data set by name, through scikit-learn's fetch_openml, "
    "cached on disk (extra 'real'; the first use needs network access)",
    params=PARAMS,
    choices=(
        "Data: an OpenML data set fetched by name and version with scikit-learn's "
        "`fetch_openml` (ARFF parsed by pandas) and cached under `data_home`; a given "
        "name and version always denote the same data.",
        "Rows with a missing value are dropped; numeric columns are used as they are; "
        "ordered categorical columns become their codes; other columns are left out.",
        *TABLE_CHOICES,
    ),
    check=check_openml,
)
