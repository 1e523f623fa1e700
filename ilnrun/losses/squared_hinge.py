"""The squared hinge loss ``l(p, y) = max(0, 1 − y p)²`` on ±1 labels (the L2-SVM's loss).

``dl/dp = −2 y max(0, 1 − y p)`` (continuous). The best constant: with a fraction ``π`` of
``+1`` labels, on ``[−1, 1]`` ``mean l(c, y) = π (1 − c)² + (1 − π) (1 + c)²``, minimised at
``c = 2π − 1``, the training-label mean (which lies in ``[−1, 1]``; outside it the mean loss only
grows). Reported with ``test_error``.
"""

from __future__ import annotations

import numpy as np

from .base import LossSpec


def value(p, y):
    """``max(0, 1 − y p)²``."""
    return np.maximum(0.0, 1.0 - y * p) ** 2


def derivative(p, y):
    """``−2 y max(0, 1 − y p)``."""
    return -2.0 * y * np.maximum(0.0, 1.0 - y * p)


def best_constant(y: np.ndarray) -> float:
    """The training-label mean ``2π − 1``."""
    return float(np.mean(y))


SPEC = LossSpec(
    name="squared_hinge",
    label="max(0,1−yp)²",
    summary="the squared hinge loss max(0, 1 − y p)² (classification, ±1 labels)",
    value=value,
    derivative=derivative,
    labels="pm1",
    best_constant=best_constant,
    metrics=("test_error",),
    no_series="its derivative −2 y max(0, 1 − y p) is not analytic at the kink y p = 1 (no "
    "Taylor series represents it across the kink), which paper 003's unbiased estimate "
    "(§III-C) needs: use smoothed_hinge or logistic",
)
