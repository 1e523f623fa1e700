"""Doubly Stochastic Gradient Descent — Dai et al. (2014) Algorithms 1 and 2, squared loss.

Round t (``gamma_t`` is the config's ``eta`` under its schedule):

    f(x_t) = sum_{i<t} sum_j alpha_{i,j} psi(x_t; omega_{i,j})     # Algorithm 2: every earlier
                                                                   # feature evaluated on x_t
    sample omega_{t,1..k} ~ mu
    alpha_{t,j} = -gamma_t (f(x_t) - y_t) psi(x_t; omega_{t,j}) / k  # Algorithm 1, line 5
    alpha_{i,.} <- (1 - gamma_t nu) alpha_{i,.}  for i < t           # Algorithm 1, line 6

Round t spends ``k (t - 1)`` evaluations on earlier features plus ``k`` on its own, so a pass
spends ``k T (T + 1) / 2``. The decay is a global scale (``alpha = s * c``), not a loop, and the
earlier features are evaluated on ``x_t`` in one vectorized gather.
"""

from __future__ import annotations

import numpy as np

from ..features import FeatureMap
from ..schedules import step_sizes
from .base import FeatureExpansion, FitResult, is_divergent, new_counters, out_of_time

RESCALE_BELOW = 1e-150


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    k: int,
    nu: float = 0.0,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """One online pass of Doubly SGD with ``k`` random features per round."""
    T = len(y)
    gammas = step_sizes(schedule, eta, T, decay)
    W = None  # stored omegas, allocated on the first draw (shape depends on the map)
    c = np.zeros(k * T)  # alpha = s * c
    s = 1.0
    losses = np.empty(T)
    counters = new_counters()
    diverged = timed_out = False

    for t in range(T):
        if t and out_of_time(deadline):
            timed_out = True
            losses = losses[:t]
            break
        n_old = k * t
        if n_old:
            psi_old = fmap.point(X[t], W[:n_old])
            counters["train_evals"] += psi_old.size
            f_t = s * float(c[:n_old] @ psi_old)
        else:
            f_t = 0.0
        losses[t] = 0.5 * (f_t - y[t]) ** 2
        if is_divergent(f_t):
            diverged = True
            losses = losses[: t + 1]
            break
        omega = fmap.sample(rng, k)
        counters["features_sampled"] += len(omega)
        if W is None:
            W = np.empty((k * T,) + omega.shape[1:], dtype=omega.dtype)
        W[n_old : n_old + k] = omega
        psi_new = fmap.point(X[t], omega)
        counters["train_evals"] += psi_new.size
        alpha_new = -gammas[t] * (f_t - y[t]) * psi_new / k
        factor = 1.0 - gammas[t] * nu
        if factor > 0.0:
            s *= factor
        else:  # a step so large that the decay factor is not positive: apply it directly
            c[:n_old] *= factor
        c[n_old : n_old + k] = alpha_new / s
        if s < RESCALE_BELOW:
            c[: n_old + k] *= s
            s = 1.0

    n_feat = k * len(losses) if not diverged else k * (len(losses) - 1)
    predictor = FeatureExpansion(W[:n_feat], s * c[:n_feat], fmap)
    return FitResult(predictor, losses, counters, diverged, timed_out)
