"""Fixed-Random features — Rahimi & Recht (2007, 2009), as compared in ILN paper Section 6.

Sample ``r`` parameters once; ``z(x) = [psi(x; w_1) ... psi(x; w_r)] / sqrt(r)``; one online pass
of SGD on the squared loss (DESIGN §2.3):

    yhat_t = beta . z(x_t)
    beta  <- beta - eta_t ((yhat_t - y_t) z(x_t) + lam beta)

Each round evaluates the ``r`` features on ``x_t``: a pass spends ``r T`` evaluations.
"""

from __future__ import annotations

import math

import numpy as np

from ..features import FeatureMap
from ..schedules import step_sizes
from .base import FeatureExpansion, FitResult, is_divergent, new_counters, out_of_time


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    r: int,
    lam: float = 0.0,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """One online pass of SGD on ``r`` fixed random features."""
    T = len(y)
    etas = step_sizes(schedule, eta, T, decay)
    counters = new_counters()
    W = fmap.sample(rng, r)
    counters["features_sampled"] += len(W)
    inv_sqrt_r = 1.0 / math.sqrt(r)
    beta = np.zeros(r)
    losses = np.empty(T)
    diverged = timed_out = False
    for t in range(T):
        if t and out_of_time(deadline):
            timed_out = True
            losses = losses[:t]
            break
        z = fmap.point(X[t], W) * inv_sqrt_r
        counters["train_evals"] += z.size
        yhat = float(beta @ z)
        losses[t] = 0.5 * (yhat - y[t]) ** 2
        if is_divergent(yhat):
            diverged = True
            losses = losses[: t + 1]
            break
        if lam:
            beta *= 1.0 - etas[t] * lam
        beta -= etas[t] * (yhat - y[t]) * z
    predictor = FeatureExpansion(W, beta * inv_sqrt_r, fmap)
    return FitResult(predictor, losses, counters, diverged, timed_out)
