"""The logistic loss ``l(p, y) = log(1 + exp(−y p))`` on ±1 labels (Dai et al. §7).

``dl/dp = −y / (1 + exp(y p)) = −y σ(−y p)``. Computed stably (``logaddexp``; the derivative
through ``exp`` of a non-positive number). The best constant is the log-odds of the training
label frequency, ``c = log(n₊ / n₋)`` (zero derivative of ``π log(1 + e^{−c}) + (1 − π)
log(1 + e^{c})``: ``−π σ(−c) + (1 − π) σ(c) = 0`` gives ``σ(c) = π``); when one class is absent
the minimiser is infinite and the frequencies are taken as ``(n± + ½) / (n + 1)`` (the
Krichevsky–Trofimov estimate) so that the yardstick is finite. Reported with ``test_error``.

``l'`` is analytic: its Taylor coefficients around any ``p`` (:func:`derivative_series`) are those
of the sigmoid, found by the recurrence of its equation ``σ' = σ (1 − σ)``. The series around
``p`` converges within ``√((y p)² + π²)``, the distance to ``σ``'s nearest poles ``±iπ`` (around 0
only within ``π``: why Shrinking Gradient expands around a pilot estimate, DESIGN §10).
"""

from __future__ import annotations

import math

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


def derivative_series(p: float, y: float, n: int) -> np.ndarray:
    """``gamma_k = l^(k+1)(p, y) / k!``, ``k = 0..n``: the Taylor coefficients of ``l'(·, y)``
    around ``p``.

    With ``z = y p``, ``l'(p + h, y) = −y σ(−z − y h)``. The Taylor coefficients ``b_k`` of ``σ``
    around ``−|z|`` (where ``σ <= ½``, so ``1 − 2 b_0`` has no cancellation) follow from
    ``σ' = σ − σ²``: ``(k + 1) b_{k+1} = b_k − Σ_{i<=k} b_i b_{k−i}``. Then ``gamma_k =
    (−1)^{k+1} y^{k+1} b_k`` for ``z >= 0``, and ``σ(−z + u) = 1 − σ(−|z| − u)`` gives
    ``gamma_0 = −y (1 − b_0)``, ``gamma_k = y^{k+1} b_k`` (k >= 1) for ``z < 0``. ``gamma_0`` is
    :func:`derivative`'s value, bit for bit."""
    z = float(y) * float(p)
    e = math.exp(-abs(z))
    b = np.empty(n + 1)
    b[0] = e / (1.0 + e)  # σ(−|z|)
    for k in range(n):
        b[k + 1] = (b[k] - float(np.dot(b[: k + 1], b[k::-1]))) / (k + 1)
    k = np.arange(n + 1)
    yk = float(y) ** (k + 1)
    gamma = (-1.0) ** (k + 1) * yk * b if z >= 0 else yk * b
    gamma[0] = float(derivative(float(p), float(y)))
    return gamma


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
    derivative_series=derivative_series,
    probability=probability,
)
