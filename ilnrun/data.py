"""Datasets. Each builder takes the dataset rng first and returns train / validation / test
splits drawn from one distribution, shared by every learner and every hyperparameter setting of a
repetition (docs/protocol.md). In every dataset the labels are brought into ``[-1, 1]`` by **one**
factor ``1 / max_i |y_i|`` computed on the training split and applied to every split (validation
and test labels may therefore exceed 1 slightly); ``info["label_scale"]`` records it.

``clipped_gaussian`` (ILN paper Section 6): ``x = max(N(0, I_D), 0)``; the target weight vector is
a random sparse combination of training points ``a = sum_{j in S} c_j x_j`` with ``|S| = sparsity``
and ``c_j ~ N(0, 1)`` (so the target lies in the RKHS of the coordinate kernel); ``y = X a``.

``teacher``: the same construction for *any* feature map with a closed-form kernel:
``y(x) = sum_{j in S} c_j k(x_j, x)`` with ``S`` a uniformly random set of ``sparsity`` training
indices, ``c_j ~ N(0, 1)`` and ``k`` the kernel of the experiment's feature map (built from the
training inputs exactly as the runner builds it, so e.g. the ``fourier`` median bandwidth is the
same). Inputs ``x ~ inputs``: ``gaussian`` ``N(0, I_D)``; ``clipped_gaussian`` ``max(N(0, I_D),
0)``; ``sphere`` Gaussian rows scaled to unit norm. Optional label noise: ``noise`` is the ratio
of the noise std to the RMS of the clean training target; it is added to every split *before* the
scaling, so training labels stay in ``[-1, 1]`` and ``noise`` does not depend on the kernel's
scale.

``file``: a CSV (header row of column names) or NPZ (one 1-D array per column, named by its key)
file; ``features`` is ``all`` (every column but the target), a comma-separated string of column
names or a YAML list of them. A header with an unnamed (``Unnamed: 0``, empty) or repeated name, a
header of numbers (no header row), a single column where ``;``, tabs or ``|`` suggest another
delimiter, rows longer or shorter than the header, and values beyond ``1e150`` in magnitude are
refused; no message quotes the file's content. Rows are shuffled with the dataset rng and split into
``T`` training, ``n_val`` validation and ``n_test`` test rows (``rest``: every remaining row). With
``standardize`` each feature column is centered and scaled by the mean and standard deviation of the
**training** rows (a constant column is only centered); with ``center`` the target's training mean
is subtracted from every split (the learners have no bias term and start at ``f = 0``). Then labels
are scaled as above.

``plotnine``: a table the plotnine package ships (``plotnine.data``; ggplot2's ``diamonds``, 53 940
rows, and others), loaded by name without a download, ordered categorical columns as their
codes, optionally ``ln(target)``, and handled exactly like ``file``.

``diabetes``: scikit-learn's bundled diabetes data (442 patients, 10 raw baseline variables, target
a measure of disease progression one year later; Efron et al. 2004), loaded without a download
(scikit-learn, a dependency of ilnrun) and handled exactly like ``file``.

Problems with a file (missing, unreadable, missing or non-numeric columns, NaNs, too few rows)
raise :class:`DataError` naming the dataset key; :func:`check` returns them as a list so that
``ilnrun validate`` / ``ilnrun run`` report them before any cell runs.

Every dataset is declared once, as a :class:`DatasetSpec` in ``DATASETS`` at the end of this
module: its builder, its config parameters, its checks and the text the report prints about it
(docs/architecture.md §6).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .features import build_feature_map
from .params import Param, show


@dataclass
class Dataset:
    """Splits of one (dataset setting, repetition)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    info: dict = field(default_factory=dict)

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return getattr(self, f"X_{name}"), getattr(self, f"y_{name}")


class DataError(Exception):
    """A dataset that cannot be built; ``key`` is the offending key under ``dataset``."""

    def __init__(self, key: str, message: str) -> None:
        self.key, self.message = key, message
        super().__init__(f"dataset.{key}: {message}")


def _normalize_rows(X: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def _scale_labels(y: np.ndarray, T: int) -> tuple[np.ndarray, float]:
    """Divide every split by ``max |y_train|`` (the first ``T`` entries); return the factor."""
    peak = float(np.max(np.abs(y[:T])))
    return (y / peak, 1.0 / peak) if peak > 0 else (y, 1.0)


def _splits(X: np.ndarray, y: np.ndarray, T: int, n_val: int, info: dict) -> Dataset:
    """Rows ``[0, T)`` train, ``[T, T + n_val)`` validation, the rest test."""
    return Dataset(
        X[:T], y[:T], X[T : T + n_val], y[T : T + n_val], X[T + n_val :], y[T + n_val :], info
    )


def clipped_gaussian(
    rng: np.random.Generator,
    *,
    D: int,
    T: int,
    n_val: int,
    n_test: int,
    sparsity: int,
    normalize_rows: bool = False,
    center: bool = False,
    rkhs_norm: float | None = None,
) -> Dataset:
    """The paper's Figure 1 data; see the module docstring for every choice.

    ``center``: subtract the training-label mean from every split before the labels are scaled
    (the learners have no bias term; see the module docstring). ``rkhs_norm``: instead of the
    max-label scaling, scale the target ``f*(x) = a·x`` so that its norm in the RKHS of
    ``k(x, x') = x·x'/D`` is ``rkhs_norm``: ``‖f*‖_H = √D ‖a‖`` (``f* = D Σ_j c_j k(x_j, ·)``),
    so that Theorem 1's comparator ball of radius ``B ≥ rkhs_norm`` contains the target. Then
    ``|y| ≤ rkhs_norm · √k(x, x)`` (Cauchy–Schwarz) and ``info`` records the norm and
    ``max |y_train|`` (Lemma 5 assumes ``|y_t| ≤ 1``)."""
    n = T + n_val + n_test
    X = np.maximum(rng.standard_normal((n, D)), 0.0)
    if normalize_rows:
        X = _normalize_rows(X)
    support = rng.choice(T, size=sparsity, replace=False)
    c = rng.standard_normal(sparsity)
    a = c @ X[support]
    y = X @ a
    info: dict = {"support": support.tolist()}
    if rkhs_norm is not None:
        norm = float(np.sqrt(D) * np.linalg.norm(a))
        factor = rkhs_norm / norm if norm > 0 else 1.0
        y = y * factor
        info.update(target_rkhs_norm=norm * factor if norm > 0 else 0.0, label_scale=factor)
    if center:
        info["train_label_mean"] = float(y[:T].mean())
        y = y - y[:T].mean()
    if rkhs_norm is None:
        y, info["label_scale"] = _scale_labels(y, T)
    info["max_abs_y_train"] = float(np.max(np.abs(y[:T])))
    X = np.ascontiguousarray(X)
    return _splits(X, y, T, n_val, info)


# ----------------------------------------------------------------------------------------------
# teacher: a target in the RKHS of the experiment's feature map

INPUTS = ("gaussian", "clipped_gaussian", "sphere")


def draw_inputs(rng: np.random.Generator, kind: str, n: int, D: int) -> np.ndarray:
    """``n`` inputs in ``R^D`` from the named distribution (see the module docstring)."""
    X = rng.standard_normal((n, D))
    if kind == "clipped_gaussian":
        return np.maximum(X, 0.0)
    if kind == "sphere":
        return _normalize_rows(X)
    if kind == "gaussian":
        return X
    raise ValueError(f"unknown input distribution {kind!r} (one of {', '.join(INPUTS)})")


def teacher(
    rng: np.random.Generator,
    *,
    D: int,
    T: int,
    n_val: int,
    n_test: int,
    sparsity: int,
    inputs: str = "sphere",
    noise: float = 0.0,
    feature_map: dict | None = None,
) -> Dataset:
    """``y(x) = sum_{j in S} c_j k(x_j, x)`` with ``k`` the kernel of ``feature_map`` (a resolved
    ``feature_map`` config section); see the module docstring for every choice."""
    if feature_map is None:
        raise ValueError("the teacher dataset needs the experiment's feature_map section")
    n = T + n_val + n_test
    X = np.ascontiguousarray(draw_inputs(rng, inputs, n, D))
    support = rng.choice(T, size=sparsity, replace=False)
    c = rng.standard_normal(sparsity)
    fmap = build_feature_map(feature_map, X[:T])
    y = fmap.kernel(X, X[support]) @ c
    noise_std = 0.0
    if noise > 0:
        noise_std = float(noise * np.sqrt(np.mean(y[:T] ** 2)))
        y = y + noise_std * rng.standard_normal(n)
    y, label_scale = _scale_labels(y, T)
    info = {
        "label_scale": label_scale,
        "support": support.tolist(),
        "coefficients": c.tolist(),
        "noise_std_unscaled": noise_std,
        "feature_map": fmap.describe(),
    }
    return _splits(X, y, T, n_val, info)


# ----------------------------------------------------------------------------------------------
# tables: file (CSV / NPZ) and bundled real data

TABLE_SUFFIXES = (".csv", ".npz")
Table = dict  # column name -> 1-D array, in file order


MAX_ABS_VALUE = 1e150  # beyond this, squares and products in the learners overflow float64
_UNNAMED = re.compile(r"^Unnamed: \d+")


def read_table(path: str) -> Table:
    """Columns of a CSV (header row) or NPZ (one 1-D array per key) file; errors name ``path``
    and never quote the file's content (rows and columns are named by index or name)."""
    p = Path(path)
    if p.suffix.lower() not in TABLE_SUFFIXES:
        raise DataError("path", f"{path!r}: unsupported file type; use a .csv or .npz file")
    if not p.exists():
        raise DataError("path", f"file {path!r} does not exist")
    if not p.is_file():
        raise DataError("path", f"{path!r} is not a regular file")
    if p.suffix.lower() == ".csv":
        return _read_csv(p, path)
    try:
        with np.load(p, allow_pickle=False) as z:
            table = {k: z[k] for k in z.files}
    except ValueError:  # object arrays (allow_pickle=False) and malformed archives
        raise DataError(
            "path", f"{path!r} is not a readable NPZ file of numeric arrays (object arrays?)"
        ) from None
    except (OSError, EOFError):
        raise DataError("path", f"{path!r} is not a readable NPZ file") from None
    if not table:
        raise DataError("path", f"{path!r} holds no arrays")
    lengths = set()
    for i, (k, v) in enumerate(table.items()):
        if not k.strip() or _UNNAMED.match(k):
            raise DataError("path", f"{path!r}: array {i} has no name (or an index-like one)")
        if v.ndim != 1:
            raise DataError(
                "path", f"{path!r}: array {k!r} must be 1-D (one column), got {v.shape}"
            )
        lengths.add(len(v))
    if len(lengths) > 1:
        raise DataError("path", f"{path!r}: columns have different lengths {sorted(lengths)}")
    return table


def _read_csv(p: Path, path: str) -> Table:
    """A CSV file whose header and rows are checked before pandas parses it: named, distinct
    columns; every row as long as the header; a header of names, not numbers; commas."""
    import pandas as pd

    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError("path", f"{path!r} is not UTF-8 text") from None
    except OSError as exc:
        raise DataError("path", f"{path!r} cannot be read: {exc.strerror}") from None
    try:
        rows = csv.reader(io.StringIO(text, newline=""))
        header = next(rows, None)
        if header is None or not any(h.strip() for h in header):
            raise DataError("path", f"{path!r} is empty (no header row)")
        check_header(header, text, path)
        for i, row in enumerate(rows):
            if row and len(row) != len(header):
                raise DataError(
                    "path",
                    f"{path!r}: data row {i} (0-based, header not counted) has {len(row)} "
                    f"fields but the header names {len(header)} columns; fix the header or "
                    f"the row (a header one name short would shift every column)",
                )
    except csv.Error:
        raise DataError("path", f"{path!r} is not a readable CSV file (bad quoting?)") from None
    try:
        df = pd.read_csv(io.StringIO(text), index_col=False, skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise DataError("path", f"{path!r} is empty") from None
    except (pd.errors.ParserError, ValueError):
        raise DataError("path", f"{path!r} is not a readable CSV file") from None
    if list(df.columns) != header:  # pandas renamed something; never use its guesses
        raise DataError("path", f"{path!r}: the header could not be read as given")
    return {name: df[name].to_numpy() for name in header}


def check_header(header: list[str], text: str, path: str) -> None:
    """Refuse a header with unnamed, index-like or repeated names, a header of numbers (the
    file has no header row) and a single column where another delimiter is likely."""
    if len(header) == 1:
        for sep, what in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
            if sep in text:
                raise DataError(
                    "path",
                    f"{path!r} reads as a single column but contains {what}: ilnrun reads "
                    f"comma-separated files; convert the delimiter to ','",
                )
        raise DataError(
            "path", f"{path!r} has a single column; a dataset needs a target and features"
        )
    for i, name in enumerate(header):
        if not name.strip() or _UNNAMED.match(name):
            raise DataError(
                "path",
                f"{path!r}: column {i} (0-based) has no name - an index column written by "
                f"pandas? Write the file with index=False or name the column",
            )
    seen: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in seen:
            raise DataError(
                "path", f"{path!r}: columns {seen[name]} and {i} are both named {name!r}"
            )
        seen[name] = i
    if all(_is_number(h) for h in header):
        raise DataError(
            "path",
            f"{path!r}: the first row holds numbers, not column names; the file seems to "
            f"have no header row - add one",
        )


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


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


def _numeric_column(v: np.ndarray, name: str, key: str) -> np.ndarray:
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
    X = np.column_stack([_numeric_column(table[f], f, "features") for f in names])
    y = _numeric_column(table[target], target, "target")
    sizes = split_sizes(len(y), T, n_val, n_test)
    return X, y, names, sizes


def _tabular(
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
    y, label_scale = _scale_labels(y, T)
    X = np.ascontiguousarray(X)
    info = {**info, "label_scale": label_scale, "rows": order.tolist()}
    return _splits(X, y, T, n_val, info)


def file(
    rng: np.random.Generator,
    *,
    path: str,
    target: str,
    features: str | list[str] = "all",
    T: int = 200,
    n_val: int = 100,
    n_test: int | str = "rest",
    standardize: bool = True,
    center: bool = True,
) -> Dataset:
    """A CSV / NPZ file; see the module docstring for every choice."""
    X, y, names, sizes = table_arrays(read_table(path), features, target, T, n_val, n_test)
    return _tabular(rng, X, y, sizes, standardize, center, {"features": names})


DIABETES_INSTALL = "pip install scikit-learn"


def diabetes_table() -> Table:
    """scikit-learn's bundled diabetes data, raw (unscaled) values; ``target`` is the label."""
    if importlib.util.find_spec("sklearn") is None:
        raise DataError(
            "kind",
            f"the 'diabetes' dataset needs scikit-learn, which is not installed: "
            f"{DIABETES_INSTALL}",
        )
    from sklearn.datasets import load_diabetes

    b = load_diabetes(scaled=False)
    table = {name: b.data[:, i] for i, name in enumerate(b.feature_names)}
    table["target"] = b.target
    return table


def diabetes(
    rng: np.random.Generator,
    *,
    features: str | list[str] = "all",
    T: int = 200,
    n_val: int = 100,
    n_test: int | str = "rest",
    standardize: bool = True,
    center: bool = True,
) -> Dataset:
    """scikit-learn's diabetes data (442 rows, 10 features); see the module docstring."""
    X, y, names, sizes = table_arrays(diabetes_table(), features, "target", T, n_val, n_test)
    return _tabular(rng, X, y, sizes, standardize, center, {"features": names})


PLOTNINE_INSTALL = "pip install 'ilnrun[real]'"


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


def plotnine(
    rng: np.random.Generator,
    *,
    name: str = "diamonds",
    target: str = "price",
    log_target: bool = False,
    features: str | list[str] = "all",
    T: int = 200,
    n_val: int = 100,
    n_test: int | str = "rest",
    standardize: bool = True,
    center: bool = True,
) -> Dataset:
    """A table plotnine ships, split and scaled exactly like ``file`` (module docstring); with
    ``log_target`` the label is ``ln(target)`` (positive targets only)."""
    table = _log_target(plotnine_table(name), target, log_target)
    X, y, names, sizes = table_arrays(table, features, target, T, n_val, n_test)
    return _tabular(rng, X, y, sizes, standardize, center, {"features": names})


def _log_target(table: Table, target: str, log_target: bool) -> Table:
    if not log_target or target not in table:
        return table
    if not (table[target] > 0).all():
        raise DataError("log_target", f"column {target!r} has values <= 0: no logarithm")
    return {**table, target: np.log(table[target])}


OPENML_INSTALL = "pip install scikit-learn"


def openml_table(name: str, version: int, data_home: str | None) -> tuple[Table, str]:
    """An OpenML data set by name and version through scikit-learn's ``fetch_openml``, cached
    under ``data_home`` (scikit-learn's default folder when ``None``): the first call downloads
    it, every later call reads the cache, with no network. Returns the table (see
    :func:`frame_table` for the columns kept) and the data set's default target column."""
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
    return frame_table(bunch.frame.dropna(), f"OpenML data set {name!r}"), (
        targets[0] if len(targets) == 1 else ""
    )


def openml_cache_put(
    data_home: str | Path, name: str, table: Table, target: str, did: int, version: int = 1
) -> None:
    """Write a numeric ``table`` into a ``fetch_openml`` cache under ``data_home`` as OpenML data
    set ``name`` / ``version`` with id ``did`` and default target ``target``: the API answers
    (name search, description, features, qualities) and the ARFF file, gzipped where
    ``fetch_openml`` looks for them, with the checksum it verifies. For machines without
    network (and the tests): afterwards ``kind: openml`` reads ``name`` from the cache."""
    import gzip
    import hashlib
    import json

    root = Path(data_home).expanduser() / "openml" / "openml.org"

    def put(path: str, payload: bytes) -> None:
        f = root / (path + ".gz")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(gzip.compress(payload))

    cols = list(table)
    values = [np.asarray(table[c], dtype=float).tolist() for c in cols]
    lines = [f"@RELATION {name}"] + [f"@ATTRIBUTE {c} NUMERIC" for c in cols] + ["@DATA"]
    lines += [",".join(repr(v) for v in row) for row in zip(*values, strict=True)]
    arff = ("\n".join(lines) + "\n").encode()
    file_id = did + 1
    api = "api/v1/json/data"
    dataset = {"did": did, "name": name, "version": version, "status": "active"}
    put(
        f"{api}/list/data_name/{name}/limit/2/data_version/{version}",
        json.dumps({"data": {"dataset": [dataset]}}).encode(),
    )
    desc = {
        "id": str(did),
        "name": name,
        "version": str(version),
        "description": f"{name}, written into the cache by ilnrun",
        "format": "ARFF",
        "status": "active",
        "file_id": str(file_id),
        "default_target_attribute": target,
        "url": f"https://www.openml.org/data/v1/download/{file_id}/{name}.arff",
        "md5_checksum": hashlib.md5(arff).hexdigest(),
    }
    put(f"{api}/{did}", json.dumps({"data_set_description": desc}).encode())
    feats = [
        {
            "index": str(i),
            "name": c,
            "data_type": "numeric",
            "is_target": str(c == target).lower(),
            "is_ignore": "false",
            "is_row_identifier": "false",
            "number_of_missing_values": "0",
        }
        for i, c in enumerate(cols)
    ]
    put(f"{api}/features/{did}", json.dumps({"data_features": {"feature": feats}}).encode())
    qual = [{"name": "NumberOfInstances", "value": f"{len(values[0])}.0"}]
    put(f"{api}/qualities/{did}", json.dumps({"data_qualities": {"quality": qual}}).encode())
    put(f"data/v1/download/{file_id}/{name}.arff", arff)


def _example_openml(folder: Path) -> dict:
    """A small data set written into a cache under ``folder`` (no network needed)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 150)).round(6)
    openml_cache_put(folder, "ilnrun-example", {"a": a, "b": b, "y": 2 * a - b}, "y", 990101)
    return {"name": "ilnrun-example", "data_home": str(folder), "T": 60, "n_val": 40}


def _openml_target(spec_target: str | None, default: str) -> str:
    target = spec_target or default
    if not target:
        raise DataError("target", "the data set has no single default target: name one")
    return target


def openml(
    rng: np.random.Generator,
    *,
    name: str | None = None,
    version: int = 1,
    data_home: str | None = None,
    target: str | None = None,
    log_target: bool = False,
    features: str | list[str] = "all",
    T: int = 200,
    n_val: int = 100,
    n_test: int | str = "rest",
    standardize: bool = True,
    center: bool = True,
) -> Dataset:
    """An OpenML data set (cached fetch), split and scaled exactly like ``file``."""
    table, default = openml_table(str(name), version, data_home)
    target = _openml_target(target, default)
    table = _log_target(table, target, log_target)
    X, y, names, sizes = table_arrays(table, features, target, T, n_val, n_test)
    return _tabular(rng, X, y, sizes, standardize, center, {"features": names})


def _check_openml(spec: dict) -> dict:
    if spec["name"] is None:
        raise DataError("name", "is required: the OpenML data set's name")
    table, default = openml_table(spec["name"], spec["version"], spec["data_home"])
    target = _openml_target(spec["target"], default)
    return _used(_log_target(table, target, spec["log_target"]), spec, target)


def _check_plotnine(spec: dict) -> dict:
    table = _log_target(plotnine_table(spec["name"]), spec["target"], spec["log_target"])
    return _used(table, spec, spec["target"])


# ----------------------------------------------------------------------------------------------
# registry: one spec per dataset


@dataclass(frozen=True)
class DatasetSpec:
    """Everything the pipeline knows about one dataset kind.

    ``build(rng, **params)`` draws one instance (``feature_map=`` is passed too when
    ``needs_kernel``: the labels use the experiment's kernel); ``params`` are its config keys
    (``dataset.<key>``; every dataset has ``T``, the length of the online pass); ``check(spec)``
    raises :class:`DataError` for a problem only the data can reveal and returns what the
    setting uses (for tables: the columns, rows and split sizes, recorded in ``config.yaml``
    under ``data_used``) or ``None`` — one read of the data does both; ``choices`` are the
    sentences the report prints about it.
    """

    name: str
    build: Callable[..., Dataset]
    params: tuple[Param, ...]
    summary: str
    choices: tuple[str, ...] = ()
    needs_kernel: bool = False
    check: Callable[[dict], dict | None] | None = None
    # a small ``dataset`` section that builds quickly (contract tests); it may write a file
    # into the folder it is given
    example: Callable[[Path], dict] | None = None


def _example_table(folder: Path) -> dict:
    """A 120-row CSV (three features, one target) written into ``folder``."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(120)
    path = Path(folder) / "example.csv"
    rows = ["a,b,c,y"] + [",".join(f"{v:.6f}" for v in (*x, t)) for x, t in zip(X, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return {"path": str(path), "target": "y", "T": 40, "n_val": 30}


def _p(name, type_, default, doc, **kw) -> Param:
    return Param(name, type_, default, doc, **kw)


def _T(default: int, doc: str = "training examples (one online pass)") -> Param:
    return _p("T", "int", default, doc, min=2, label="training examples per pass T")


def _synthetic_sizes(D: int) -> tuple[Param, ...]:
    return (
        _p("D", "int", D, "input dimension", min=1, label="input dimension D"),
        _T(200),
        _p("n_val", "int", 500, "validation examples", min=1, label="validation examples n_val"),
        _p("n_test", "int", 2000, "test examples", min=1, label="test examples n_test"),
    )


SPARSITY_LABEL = "target sparsity (support points)"
SCALE_CHOICE = (
    "Labels are brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the training "
    "set and applied to every split (validation and test labels may slightly exceed 1)."
)
SHARED_SPLITS = (
    "Validation and test sets are fresh draws from the same distribution, labelled by the same "
    "target; all learners and all grid points of a repetition share them."
)

# Splits and scaling shared by the datasets read from tables (file, diabetes).
TABLE_SPLIT_PARAMS = (
    _p("n_val", "int", 100, "validation rows", min=1),
    _p(
        "n_test",
        "int",
        "rest",
        "test rows, or 'rest' (all remaining rows)",
        min=1,
        special=("rest",),
    ),
    _p("standardize", "bool", True, "z-score features with training-split statistics"),
    _p("center", "bool", True, "subtract the training-split mean of the target"),
)
# The label transform, columns and splits shared by the tables read by name (plotnine, openml).
LABELLED_TABLE_PARAMS = (
    _p("log_target", "bool", False, "use ln(target) as the label"),
    _p(
        "features",
        "strlist",
        "all",
        "'all' (every numeric or ordered categorical column but the target), "
        "comma-separated names or a list of names",
    ),
    _T(200, "training rows (one online pass)"),
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


def _check_file(spec: dict) -> dict:
    if spec["path"] is None:
        raise DataError("path", "is required: a .csv or .npz file")
    if spec["target"] is None:
        raise DataError("target", "is required: the name of the label column")
    return _used(read_table(spec["path"]), spec, spec["target"])


def _used(table: Table, spec: dict, target: str) -> dict:
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


def _check_diabetes(spec: dict) -> dict:
    return _used(diabetes_table(), spec, "target")


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec(
            name="clipped_gaussian",
            build=clipped_gaussian,
            summary="the paper's Figure 1 data: clipped-Gaussian inputs, target in the RKHS of "
            "the coordinate kernel",
            example=lambda folder: {"D": 12, "T": 20, "n_val": 10, "n_test": 15, "sparsity": 3},
            params=(
                *_synthetic_sizes(600),
                _p(
                    "sparsity",
                    "int",
                    10,
                    "training points in the target's expansion (<= T)",
                    min=1,
                    label=SPARSITY_LABEL,
                ),
                _p(
                    "normalize_rows",
                    "bool",
                    False,
                    "scale every x to unit norm",
                    label="rows normalized to unit norm",
                ),
                _p(
                    "center",
                    "bool",
                    False,
                    "subtract the training-label mean from every split before scaling (false: "
                    "the paper's literal setting)",
                    key_omit=False,
                    label="labels centred",
                ),
                _p(
                    "rkhs_norm",
                    "float",
                    None,
                    "scale the target to this norm in the RKHS of k(x, x') = x.x'/D instead "
                    "of scaling labels into [-1, 1] (Theorem 1: choose <= B)",
                    min=0,
                    min_exclusive=True,
                    special=(None,),
                    key_omit=None,
                    label="target RKHS norm",
                ),
            ),
            choices=(
                "Inputs `x = max(N(0, I_D), 0)`: standard Gaussian with negative values clipped "
                "to 0 (paper Section 6).",
                "Target: `a = Σ_{j∈S} c_j x_j` with `S` a uniformly random subset of `sparsity` "
                "training indices and `c_j ~ N(0, 1)`; labels `y = X a` (no noise). The paper "
                "says only 'a random sparse linear combination of the training points'.",
                SCALE_CHOICE + " The paper does not say how labels are scaled.",
                "Rows are not normalized unless `normalize_rows: true`.",
                "Labels are not centred unless `center: true` (the paper's literal setting). "
                "With `center: true` the training-label mean is subtracted from every split "
                "before the scaling, so the zero predictor is the mean predictor. Centring was "
                "chosen over a bias term because it changes no learner (a bias would add an "
                "unbudgeted, non-kernel coordinate to all four algorithms and to Theorem 1's "
                "analysis); the price is that the centred target `a·x − ȳ` is no longer exactly "
                "in the RKHS of `x·x'/D` (the constant is only approximated by `a·x` on "
                "non-negative inputs).",
                "With `rkhs_norm` set, the target is scaled to that norm in the RKHS of "
                "`k(x, x') = x·x'/D` (`‖a·x‖_H = √D ‖a‖`) instead of the max-label scaling, so a "
                "comparator ball of radius `B ≥ rkhs_norm` contains it (Theorem 1); labels then "
                "satisfy `|y| ≤ rkhs_norm · √k(x, x)`.",
                SHARED_SPLITS,
            ),
        ),
        DatasetSpec(
            name="teacher",
            build=teacher,
            summary="a target in the RKHS of the experiment's own feature map (needs its kernel)",
            needs_kernel=True,
            example=lambda folder: {"D": 4, "T": 20, "n_val": 10, "n_test": 15, "sparsity": 3},
            params=(
                *_synthetic_sizes(20),
                _p(
                    "sparsity",
                    "int",
                    10,
                    "training points x_j in the target y = sum_j c_j k(x_j, x), c_j ~ N(0, 1) "
                    "(<= T)",
                    min=1,
                    label=SPARSITY_LABEL,
                ),
                _p(
                    "inputs",
                    "str",
                    "sphere",
                    "x ~ N(0, I_D), max(N(0, I_D), 0), or N(0, I_D) scaled to unit norm",
                    choices=INPUTS,
                ),
                _p(
                    "noise",
                    "float",
                    0.0,
                    "label noise std as a fraction of the clean training target's RMS (added to "
                    "every split before labels are scaled into [-1, 1])",
                    min=0,
                ),
            ),
            choices=(
                "Target in the RKHS of the experiment's own feature map (the paper's "
                "construction, generalized): `y(x) = Σ_{j∈S} c_j k(x_j, x)` with `S` a uniformly "
                "random subset of `sparsity` training indices, `c_j ~ N(0, 1)` and `k` the "
                "closed-form kernel of the configured feature map (built from the training "
                "inputs, as the learners' map is).",
                "Inputs (`inputs`): `gaussian` `N(0, I_D)`; `clipped_gaussian` `max(N(0, I_D), "
                "0)`; `sphere` `N(0, I_D)` rows scaled to unit norm, so `k(x, x) = 1` for the "
                "`relu` and `fourier` kernels. The ReLU features are nonetheless **not** bounded "
                "by 1 as the paper's analysis assumes: on the sphere `w·x ~ N(0, 1)`, so "
                "`ψ = √2 max(0, w·x)` exceeds 1 with probability ≈ 0.24 and is unbounded; only "
                "its second moment is 1.",
                "Label noise (`noise`): Gaussian, std = `noise` × RMS of the clean training "
                "target, added to every split before scaling (0 = noiseless, the default).",
                SCALE_CHOICE,
                SHARED_SPLITS,
            ),
        ),
        DatasetSpec(
            name="file",
            build=file,
            summary="your own data: a CSV (header row) or NPZ file, one row per example",
            example=_example_table,
            params=(
                _p(
                    "path",
                    "path",
                    None,
                    "a .csv (header row of names) or .npz (one 1-D array per column) file; a "
                    "relative path is relative to the config file's folder (required)",
                    special=(None,),
                ),
                _p("target", "str", None, "the label column (required)", special=(None,)),
                _p(
                    "features",
                    "strlist",
                    "all",
                    "'all' (every column but the target), comma-separated column names, or a "
                    "list of column names",
                ),
                _T(200, "training rows (one online pass)"),
                *TABLE_SPLIT_PARAMS,
            ),
            choices=TABLE_CHOICES,
            check=_check_file,
        ),
        DatasetSpec(
            name="diabetes",
            build=diabetes,
            summary="scikit-learn's bundled diabetes data (442 rows, 10 features; extra 'real')",
            example=lambda folder: {"T": 50, "n_val": 40},
            params=(
                _p(
                    "features",
                    "strlist",
                    "all",
                    "'all', comma-separated names or a list of names among age, sex, bmi, bp, "
                    "s1..s6",
                ),
                _T(200, "training rows (one online pass; 442 rows in all)"),
                *TABLE_SPLIT_PARAMS,
            ),
            choices=(
                "Data: scikit-learn's bundled diabetes set (Efron et al. 2004): 442 patients, "
                "10 raw baseline variables (age, sex, bmi, bp, s1–s6), target a quantitative "
                "measure of disease progression one year later; no download "
                "(scikit-learn ships it).",
                *TABLE_CHOICES,
            ),
            check=_check_diabetes,
        ),
        DatasetSpec(
            name="plotnine",
            build=plotnine,
            summary="a table the plotnine package ships, by name (ggplot2's diamonds: 53,940 "
            "rows; extra 'real')",
            example=lambda folder: {"name": "mpg", "target": "hwy", "T": 60, "n_val": 40},
            params=(
                _p(
                    "name",
                    "str",
                    "diamonds",
                    "the table, an attribute of plotnine.data (diamonds, txhousing, mpg, ...)",
                ),
                _p("target", "str", "price", "the label column"),
                *LABELLED_TABLE_PARAMS,
            ),
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
            check=_check_plotnine,
        ),
        DatasetSpec(
            name="openml",
            build=openml,
            example=_example_openml,
            summary="a public OpenML data set by name, through scikit-learn's fetch_openml, "
            "cached on disk (extra 'real'; the first use needs network access)",
            params=(
                _p("name", "str", None, "the OpenML data set's name (required)", special=(None,)),
                _p(
                    "version",
                    "int",
                    1,
                    "the data set's version (OpenML versions never change)",
                    min=1,
                ),
                _p(
                    "data_home",
                    "str",
                    None,
                    "cache folder of fetch_openml (default: scikit-learn's, ~/scikit_learn_data)",
                    special=(None,),
                ),
                _p(
                    "target",
                    "str",
                    None,
                    "the label column (default: the data set's default target)",
                    special=(None,),
                ),
                *LABELLED_TABLE_PARAMS,
            ),
            choices=(
                "Data: an OpenML data set fetched by name and version with scikit-learn's "
                "`fetch_openml` (ARFF parsed by pandas) and cached under `data_home`; a given "
                "name and version always denote the same data.",
                "Rows with a missing value are dropped; numeric columns are used as they are; "
                "ordered categorical columns become their codes; other columns are left out.",
                *TABLE_CHOICES,
            ),
            check=_check_openml,
        ),
    )
}


def inspect(spec: dict) -> tuple[list[tuple[str, str]], dict | None]:
    """Problems ``(dataset key, message)`` that only the data can reveal (files: existence,
    columns, values, rows; packages), found without building the splits, and what the setting
    uses (``None`` when the dataset does not say, or on a problem), from one read of the data."""
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
