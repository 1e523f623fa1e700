"""Nyström features with logistic regression — a batch classification reference (issue 27 item
4), the logistic twin of :mod:`.nystroem_svm` (the same Nyström features, landmarks and
predictor; see there). scikit-learn's ``LogisticRegression`` (L2 penalty, no intercept, lbfgs)
solves

    beta = argmin_beta  (1/2) ‖beta‖² + C sum_t log(1 + exp(−y_t beta · z(x_t)))

on ±1 labels; ``rank`` and ``C`` are selected on the validation loss like every other setting.
"""

from __future__ import annotations

import numpy as np

from ..features import FeatureMap
from .base import FitResult
from .nystroem_svm import fit_linear, spec


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    rank: int = 500,
    C: float = 1.0,
    loss: str = "logistic",
    deadline: float | None = None,
) -> FitResult:
    """``LogisticRegression`` (penalty ``C``) on ``min(rank, T)`` Nyström features."""
    from sklearn.linear_model import LogisticRegression

    if loss != "logistic":
        raise ValueError(f"nystroem_logistic learns with the logistic loss, got {loss!r}")

    def solver():
        return LogisticRegression(C=C, fit_intercept=False, max_iter=10_000)

    return fit_linear(X, y, fmap, rng, rank, loss, solver)


SPEC = spec(
    "nystroem_logistic",
    "Nyström + LogisticRegression (batch)",
    "NLR",
    "logistic",
    "LogisticRegression",
    fit,
)
