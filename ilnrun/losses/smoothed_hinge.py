"""The Gaussian-smoothed (erf-smoothed) hinge loss on ±1 labels, ``σ = SIGMA = 0.5``.

The hinge ``max(0, z)`` of the margin deficit ``z = 1 − y p`` averaged over ``z + σ ε``,
``ε ~ N(0, 1)``:

    l(p, y) = E max(0, z + σ ε) = z Φ(z / σ) + σ φ(z / σ),      z = 1 − y p,
    dl/dp   = −y Φ(z / σ) = −y ½ erfc(−z / (σ √2)),

``Φ``, ``φ`` the standard normal distribution function and density. It is convex, its
derivative is an entire (analytic) function of ``p`` — what seed 003's unbiased gradient of an
analytic ``l'`` needs (DESIGN §10; the hinge's discontinuous ``l'`` has none) — and it exceeds
the hinge by at most ``σ φ(0) = σ / √(2π) ≈ 0.20`` (at the kink; by ``σ φ(z/σ) − |z| Φ(−|z|/σ)``
elsewhere), tending to it as ``σ → 0``. ``σ = 0.5``, a fixed choice (a loss has no parameters):
half the hinge's margin.

The best constant ``c`` solves ``π Φ((1 − c)/σ) = (1 − π) Φ((1 + c)/σ)`` (``π`` the fraction of
``+1`` labels; the mean loss is convex in ``c``), found by bisection on
``[−(1 + 10σ), 1 + 10σ]`` (its end when a class is absent and the minimiser is infinite).
Reported with ``test_error``.

The Taylor coefficients of ``l'`` around any ``p`` (:func:`derivative_series`) are those of
``Φ``, whose derivatives are the Gaussian's, ``φ^(j)(u) = (−1)^j He_j(u) φ(u)`` (``He_j`` the
probabilists' Hermite polynomials): an entire series, converging everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from .base import LossSpec

SIGMA = 0.5
_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _Phi(u):
    """The standard normal distribution function, ``½ erfc(−u / √2)`` (floats or arrays)."""
    if np.ndim(u) == 0:
        return 0.5 * math.erfc(-float(u) / _SQRT2)
    return 0.5 * _erfc(-np.asarray(u, dtype=float) / _SQRT2).astype(float)


def value(p, y):
    """``z Φ(z/σ) + σ φ(z/σ)``, ``z = 1 − y p``."""
    z = 1.0 - y * p
    u = z / SIGMA
    return z * _Phi(u) + SIGMA * _INV_SQRT_2PI * np.exp(-0.5 * u * u)


def derivative(p, y):
    """``−y Φ((1 − y p)/σ)``."""
    return -y * _Phi((1.0 - y * p) / SIGMA)


def derivative_series(p: float, y: float, n: int) -> np.ndarray:
    """``gamma_k = l^(k+1)(p, y) / k!``, ``k = 0..n``: the Taylor coefficients of ``l'(·, y)``
    around ``p``.

    ``l'(p + h, y) = −y Φ(u₀ − y h / σ)``, ``u₀ = (1 − y p) / σ``, and ``Φ(u₀ + v) = Φ(u₀) +
    Σ_{k>=1} φ^(k−1)(u₀) v^k / k!`` with ``φ^(j)(u₀) / j! = (−1)^j c_j φ(u₀)``, ``c_j =
    He_j(u₀) / j!`` by the Hermite recurrence ``c_0 = 1``, ``c_1 = u₀``, ``c_{j+1} = (u₀ c_j −
    c_{j−1}) / (j + 1)``. Hence ``gamma_k = y^{k+1} c_{k−1} φ(u₀) / (k σ^k)`` for ``k >= 1`` and
    ``gamma_0 = −y Φ(u₀)`` (:func:`derivative`'s value, bit for bit)."""
    y = float(y)
    u0 = (1.0 - y * float(p)) / SIGMA
    c = np.empty(max(n, 1))
    c[0] = 1.0
    if n > 1:
        c[1] = u0
    for j in range(1, n - 1):
        c[j + 1] = (u0 * c[j] - c[j - 1]) / (j + 1)
    gamma = np.empty(n + 1)
    gamma[0] = float(derivative(float(p), y))
    density = _INV_SQRT_2PI * math.exp(-0.5 * u0 * u0)
    k = np.arange(1, n + 1)
    gamma[1:] = y ** (k + 1) * c[:n] * density / (k * SIGMA**k)
    return gamma


def best_constant(y: np.ndarray) -> float:
    """The minimiser of ``mean l(c, y)`` over constants, by bisection on its derivative."""
    n = len(y)
    pi = float(np.sum(y > 0)) / n if n else 0.5
    lo, hi = -(1.0 + 10 * SIGMA), 1.0 + 10 * SIGMA

    def slope(c: float) -> float:
        return -pi * _Phi((1.0 - c) / SIGMA) + (1.0 - pi) * _Phi((1.0 + c) / SIGMA)

    if slope(lo) >= 0:
        return lo
    if slope(hi) <= 0:
        return hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


SPEC = LossSpec(
    name="smoothed_hinge",
    label="hinge ⊛ N(0, ½²)",
    summary="the hinge smoothed by a Gaussian (σ = 0.5): z Φ(z/σ) + σ φ(z/σ), z = 1 − y p "
    "(classification, ±1 labels; an analytic derivative)",
    value=value,
    derivative=derivative,
    labels="pm1",
    best_constant=best_constant,
    metrics=("test_error",),
    derivative_series=derivative_series,
)
