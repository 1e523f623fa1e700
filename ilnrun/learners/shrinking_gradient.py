"""Shrinking Gradient — ILN paper (Livni, Carmon, Globerson) Algorithms 1 and 2.

Algorithm 1, round t (``E_t`` from Algorithm 2, EST_SCALAR_PROD, is also the online prediction):

    E_t = EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m)
    if |E_t| < 16 B:  alpha_t = eta_t (y_t - E_t)        # gradient DESCENT step (see erratum)
    else:             alpha   = alpha / 4                # shrink

Algorithm 2: ``E = 0`` if ``alpha = 0``; else draw ``m`` iid pairs ``(i, w)`` with
``i ~ q(i) = |alpha_i| / |alpha|_1`` and ``w ~ mu`` and return
``E = |alpha|_1 / m * sum_k sgn(alpha_i) psi(x_i; w) psi(x_t; w)``.

**Erratum.** The paper prints ``alpha_t = -eta (y_t - E_t)``, which is gradient *ascent* on the
squared loss. Its own analysis (Section 5: ``f_{t+1} = f_t - eta grad_t`` with
``grad_t = (E_t - y_t) Phi(x_t)``) gives ``alpha_t = eta (y_t - E_t)``, implemented here.
``printed_sign=True`` reproduces the printed rule; ``tests/test_shrinking_gradient.py`` shows it
diverges.

Cost per round is O(m log t), independent of the number of stored examples (DESIGN §2.1):

- ``alpha = s * a`` with a global scale ``s``: a shrink is ``s <- s / 4`` (O(1));
- ``|a|`` only grows by appends, so its cumulative sum ``cum`` is append-only and the ``m`` draws
  of ``i`` are one vectorized ``searchsorted(cum, u * cum[-1])``;
- the averaged predictor ``fbar = (1/T) sum_{t=1..T} f_t`` (Corollary 1) has coefficient
  ``a_i * sum_{t > i} s_t / T``; we store the running sum ``P_i = sum_{t <= i} s_t`` when ``a_i``
  is appended and finish with ``a_i (P_T - P_i) / T`` — O(1) per round.
"""

from __future__ import annotations

import math

import numpy as np

from ..features import FeatureMap
from ..schedules import step_sizes
from .base import FitResult, KernelExpansion, is_divergent, new_counters

SAMPLERS = ("iid", "systematic")

# When the global scale falls below this, fold it into the coefficients (O(t), happens at most
# once every ~250 consecutive shrinks) so that ``a = alpha / s`` stays in floating-point range.
RESCALE_BELOW = 1e-150


def theory_preset(B: float, T: int, c: float) -> tuple[float, int]:
    """Theorem 1's setting: ``eta = B / sqrt(T)``, ``m = ceil(c B^4 T log(B T))``."""
    return B / math.sqrt(T), max(1, math.ceil(c * B**4 * T * math.log(max(B * T, math.e))))


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    m: int,
    B: float = 1.0,
    schedule: str = "constant",
    decay: float | None = None,
    sampler: str = "iid",
    printed_sign: bool = False,
) -> FitResult:
    """One online pass of Algorithm 1 over ``(X, y)``; returns final and averaged predictors."""
    T = len(y)
    etas = step_sizes(schedule, eta, T, decay)
    sign = -1.0 if printed_sign else 1.0
    threshold = 16.0 * B
    a = np.zeros(T)  # alpha = s * a
    cum = np.zeros(T)  # cum[i] = sum_{j <= i} |a_j|   (append-only)
    P_at = np.zeros(T)  # P_i = sum_{t <= i} s_t recorded when a_i is appended
    abar = np.zeros(T)  # averaged-predictor mass (alpha units) folded in at rescalings
    s, P = 1.0, 0.0
    losses = np.empty(T)
    counters = new_counters()
    diverged = False
    offsets = np.arange(m) / m if sampler == "systematic" else None

    for t in range(T):  # round t + 1 of the paper; examples 0..t-1 are stored
        P += s
        total = cum[t - 1] if t > 0 else 0.0  # |alpha|_1 = s * total
        # --- Algorithm 2: EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m) ---------------------------
        if total > 0.0:
            u = rng.random(m) if offsets is None else offsets + rng.random() / m
            i = np.searchsorted(cum[:t], u * total, side="right")
            np.minimum(i, t - 1, out=i)
            w = fmap.sample(rng, m)
            psi_i = fmap.pairs(X, i, w)
            psi_t = fmap.point(X[t], w)
            counters["features_sampled"] += len(w)
            counters["train_evals"] += psi_i.size + psi_t.size
            E = s * total / m * float(np.dot(np.sign(a[i]) * psi_i, psi_t))
        else:
            E = 0.0
        losses[t] = 0.5 * (E - y[t]) ** 2
        if is_divergent(E):
            diverged = True
            losses = losses[: t + 1]
            break
        # --- Algorithm 1: gradient step or shrink -------------------------------------------
        if abs(E) < threshold:
            a[t] = sign * etas[t] * (y[t] - E) / s
        else:
            s /= 4.0
            counters["shrinks"] += 1
        cum[t] = total + abs(a[t])
        P_at[t] = P
        if s < RESCALE_BELOW:
            n = t + 1
            abar[:n] += a[:n] * (P - P_at[:n])  # averaged mass so far, in alpha units
            a[:n] *= s
            np.cumsum(np.abs(a[:n]), out=cum[:n])
            P_at[:n] = 0.0
            P, s = 0.0, 1.0

    n = len(losses)
    final = KernelExpansion(s * a[:n])
    averaged = KernelExpansion((abar[:n] + a[:n] * (P - P_at[:n])) / T)
    return FitResult(final, losses, counters, diverged=diverged, averaged=averaged)
