"""What every dataset kind shares: the splits (:class:`Dataset`), the error that names a key
(:class:`DataError`), the declaration (:class:`DatasetSpec`), one label scaling and the helpers
that declare a kind's config parameters once (:func:`declared`).

In every dataset the labels are brought into ``[-1, 1]`` by **one** factor ``1 / max_i |y_i|``
computed on the training split and applied to every split (validation and test labels may
therefore exceed 1 slightly); ``info["label_scale"]`` records it (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..params import Param


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


def unit_norm_rows(X: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def scale_labels(y: np.ndarray, T: int) -> tuple[np.ndarray, float]:
    """Divide every split by ``max |y_train|`` (the first ``T`` entries); return the factor."""
    peak = float(np.max(np.abs(y[:T])))
    return (y / peak, 1.0 / peak) if peak > 0 else (y, 1.0)


def check_sparsity(spec: dict) -> None:
    """``sparsity <= T`` (the ``check`` of the kinds whose target is a combination of
    ``sparsity`` training points, drawn without replacement): raises :class:`DataError`."""
    if spec["sparsity"] > spec["T"]:
        raise DataError(
            "sparsity", f"must be <= T, got sparsity={spec['sparsity']} with T={spec['T']}"
        )


def splits(X: np.ndarray, y: np.ndarray, T: int, n_val: int, info: dict) -> Dataset:
    """Rows ``[0, T)`` train, ``[T, T + n_val)`` validation, the rest test."""
    return Dataset(
        X[:T], y[:T], X[T : T + n_val], y[T : T + n_val], X[T + n_val :], y[T + n_val :], info
    )


@dataclass(frozen=True)
class DatasetSpec:
    """Everything the pipeline knows about one dataset kind.

    ``build(rng, **params)`` draws one instance (``feature_map=`` is passed too when
    ``needs_kernel``: the labels use the experiment's kernel); ``params`` are its config keys
    (``dataset.<key>``; every dataset has ``T``, the length of the online pass) and, through
    :func:`declared`, the builder's keyword defaults; ``check(spec)``, given one resolved
    setting (axes fixed), raises :class:`DataError` naming the key for every setting its
    builder cannot build — a relation between keys that a ``Param``'s range cannot state
    (``sparsity <= T``) or a problem only the data can reveal — and returns what the setting
    uses (for tables: the columns, rows and split sizes, recorded in ``config.yaml`` under
    ``data_used``; for a table read by name also ``inputs``, its content's identity) or
    ``None`` — one read of the data does both. ``ilnrun validate`` and ``ilnrun run`` call it
    for every setting before any cell (exit status 2 naming ``dataset.<key>``), so a builder
    never fails on a setting its check passed. ``choices`` are the sentences the report prints
    about it.

    ``labels`` is the label space: ``"real"`` (regression: any real label, brought into
    ``[-1, 1]`` by the one factor of :func:`scale_labels`) or ``"pm1"`` (binary
    classification: every label of every split is exactly ``+1`` or ``-1``, so the scaling is
    the identity; the ILN paper's remark after its Eq. 6 suggests the square loss on such labels
    for classification). A loss declares the label spaces it accepts; which class is ``+1`` is
    the kind's documented choice (docs/protocol.md §2).
    """

    name: str
    build: Callable[..., Dataset]
    params: tuple[Param, ...]
    summary: str
    choices: tuple[str, ...] = ()
    needs_kernel: bool = False
    # with ``needs_kernel``: labels made with a Monte-Carlo kernel where the map has no closed
    # form (``FeatureMap.kernel_estimate``), so such a map is not refused
    estimated_kernel: bool = False
    # label noise (a ``noise`` parameter) reaches the training and validation labels only: the
    # test labels are the clean target, so a test loss is an excess risk over it exactly
    clean_test: bool = False
    check: Callable[[dict], dict | None] | None = None
    # a small ``dataset`` section that builds quickly (contract tests); it may write a file
    # into the folder it is given. ``None`` for a kind whose data cannot be made up here (the
    # tests bring their own example).
    example: Callable[[Path], dict] | None = None
    labels: str = "real"


def declared(params: tuple[Param, ...]) -> Callable:
    """Decorator: the builder's keyword-only defaults are the ``params``' defaults, so a default
    is declared once (in its :class:`~ilnrun.params.Param`). The builder declares its
    parameters without defaults; declaring one there as well is an error."""

    def apply(build: Callable) -> Callable:
        own = dict(build.__kwdefaults__ or {})
        twice = sorted(set(own) & {p.name for p in params})
        if twice:
            raise TypeError(f"{build.__name__}: default(s) declared twice: {', '.join(twice)}")
        build.__kwdefaults__ = {**own, **{p.name: p.default for p in params}}
        return build

    return apply


def param(name, type_, default, doc, **kw) -> Param:
    return Param(name, type_, default, doc, **kw)


def T_param(default: int, doc: str = "training examples (one online pass)") -> Param:
    return param("T", "int", default, doc, min=2, label="training examples per pass T")


def synthetic_sizes(D: int) -> tuple[Param, ...]:
    """``D``, ``T``, ``n_val``, ``n_test`` of a synthetic dataset (``D``'s default given)."""
    return (
        param("D", "int", D, "input dimension", min=1, label="input dimension D"),
        T_param(200),
        param("n_val", "int", 500, "validation examples", min=1, label="validation examples n_val"),
        param("n_test", "int", 2000, "test examples", min=1, label="test examples n_test"),
    )


# how a dataset's label-noise choice sentence begins: the report prints it only where some
# ``noise`` is above 0 (:func:`ilnrun.report.sections.setup.applies`)
NOISE_CHOICE = "With `noise` = σ > 0"
SPARSITY_LABEL = "target sparsity (support points)"
SCALE_CHOICE = (
    "Labels are brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the training "
    "set and applied to every split (validation and test labels may slightly exceed 1)."
)
SHARED_SPLITS = (
    "Validation and test sets are fresh draws from the same distribution, labelled by the same "
    "target; all learners and all grid points of a repetition share them."
)
