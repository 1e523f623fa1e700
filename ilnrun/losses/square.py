"""The square loss ``l(p, y) = ½ (p − y)²`` (ILN paper Eq. 6; DESIGN §1): every committed number.

``dl/dp = p − y``. Any real label. The best constant is the training-label mean ``ȳ`` (the
minimiser of ``mean ½ (c − y)²``). Reported with the NMSE, ``mean (f(x) − y)² / var(y_test)``
(1 = the test-label mean). Its mean is computed as ``0.5 * mean((p − y)²)``, the order of
operations of every number computed before losses were plugins (so they stay byte-identical).
"""

from __future__ import annotations

import numpy as np

from .base import LossSpec


def value(p, y):
    """``½ (p − y)²``."""
    return 0.5 * (p - y) ** 2


def derivative(p, y):
    """``p − y``."""
    return p - y


def mean(p: np.ndarray, y: np.ndarray) -> float:
    """``0.5 * mean((p − y)²)``, in that order."""
    return float(0.5 * np.mean((p - y) ** 2))


def best_constant(y: np.ndarray) -> float:
    """The training-label mean."""
    return float(np.mean(y))


SPEC = LossSpec(
    name="square",
    label="½(p−y)²",
    summary="the square loss ½ (p − y)² (regression; the ILN paper's loss)",
    value=value,
    derivative=derivative,
    labels="real",
    best_constant=best_constant,
    metrics=("test_nmse",),
    mean=mean,
)
