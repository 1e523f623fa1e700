"""The logistic loss ``l(p, y) = log(1 + exp(−y p))`` on ±1 labels (Dai et al. §7).

``dl/dp = −y / (1 + exp(y p)) = −y σ(−y p)``. Computed stably (``logaddexp``; the derivative
through ``exp`` of a non-positive number). The best constant is the log-odds of the training
label frequency, ``c = log(n₊ / n₋)`` (zero derivative of ``π log(1 + e^{−c}) + (1 − π)
log(1 + e^{c})``: ``−π σ(−c) + (1 − π) σ(c) = 0`` gives ``σ(c) = π``); when one class is absent
the minimiser is infinite and the frequencies are taken as ``(n± + ½) / (n + 1)`` (the
Krichevsky–Trofimov estimate) so that the yardstick is finite. Reported with ``test_error``.
"""

from __future__ import annotations

import numpy as np

from .base import LossSpec


def value(p, y):
    """``log(1 + exp(−y p))``."""
    return np.logaddexp(0.0, -y * p)


def derivative(p, y):
    """``−y / (1 + exp(y p))``."""
    z = y * p
    e = np.exp(-np.abs(z))  # σ(−z) = 1/(1 + e^z): e/(1 + e) for z >= 0, 1/(1 + e) for z < 0
    return -y * np.where(z >= 0, e / (1.0 + e), 1.0 / (1.0 + e))


def probability(p):
    """``P(y = +1) = σ(p) = 1 / (1 + exp(−p))``: the logistic loss is the negative
    log-likelihood of ``y`` under it (``log(1 + e^{−yp}) = −log σ(yp)``). Computed stably."""
    p = np.asarray(p, dtype=float)
    e = np.exp(-np.abs(p))
    return np.where(p >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def best_constant(y: np.ndarray) -> float:
    """``log(n₊ / n₋)`` (``(n± + ½)`` when a class is absent)."""
    pos, neg = float(np.sum(y > 0)), float(np.sum(y < 0))
    if pos == 0 or neg == 0:
        pos, neg = pos + 0.5, neg + 0.5
    return float(np.log(pos / neg))


SPEC = LossSpec(
    name="logistic",
    label="log(1+e^(−yp))",
    summary="the logistic loss log(1 + exp(−y p)) (classification, ±1 labels)",
    value=value,
    derivative=derivative,
    labels="pm1",
    best_constant=best_constant,
    metrics=("test_error",),
    probability=probability,
)
