"""Datasets. Each builder returns train / validation / test splits drawn from one distribution,
shared by every learner and every hyperparameter setting of a repetition (DESIGN §4).

``clipped_gaussian`` (ILN paper Section 6): ``x = max(N(0, I_D), 0)``; the target weight vector is
a random sparse combination of training points ``a = sum_{j in S} c_j x_j`` with ``|S| = sparsity``
and ``c_j ~ N(0, 1)`` (so the target lies in the RKHS of the coordinate kernel); ``y = X a``.
Labels are brought into ``[-1, 1]`` by one factor ``1 / max_i |y_i|`` computed on the training
set and applied to every split (validation / test labels may therefore exceed 1 slightly).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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


def _normalize_rows(X: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def clipped_gaussian(
    rng: np.random.Generator,
    *,
    D: int,
    T: int,
    n_val: int,
    n_test: int,
    sparsity: int,
    normalize_rows: bool = False,
) -> Dataset:
    """The paper's Figure 1 data; see the module docstring for every choice."""
    n = T + n_val + n_test
    X = np.maximum(rng.standard_normal((n, D)), 0.0)
    if normalize_rows:
        X = _normalize_rows(X)
    support = rng.choice(T, size=sparsity, replace=False)
    c = rng.standard_normal(sparsity)
    a = c @ X[support]
    y = X @ a
    scale = float(np.max(np.abs(y[:T])))
    y = y / scale if scale > 0 else y
    X = np.ascontiguousarray(X)
    return Dataset(
        X[:T],
        y[:T],
        X[T : T + n_val],
        y[T : T + n_val],
        X[T + n_val :],
        y[T + n_val :],
        info={"label_scale": 1.0 / scale if scale > 0 else 1.0, "support": support.tolist()},
    )


DATASETS = {"clipped_gaussian": clipped_gaussian}


def build_dataset(spec: dict, rng: np.random.Generator) -> Dataset:
    """Build one dataset instance from a resolved dataset setting (axes already fixed)."""
    params = {k: v for k, v in spec.items() if k != "kind"}
    return DATASETS[spec["kind"]](rng, **params)
