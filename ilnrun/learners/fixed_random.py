"""Fixed-Random features — Rahimi & Recht (2007, 2009), as compared in ILN paper Section 6.

Sample ``r`` parameters once; ``z(x) = [psi(x; w_1) ... psi(x; w_r)] / sqrt(r)``; one online pass
of SGD on the squared loss (docs/algorithms.md §3):

    yhat_t = beta . z(x_t)
    beta  <- beta - eta_t ((yhat_t - y_t) z(x_t) + lam beta)

Each round evaluates the ``r`` features on ``x_t``: a pass spends ``r T`` evaluations.
"""

from __future__ import annotations

import math

import numpy as np

from ..features import FeatureMap
from ..params import Param
from .base import (
    STEP_PARAMS,
    BudgetSize,
    FeatureExpansion,
    FitResult,
    LearnerSpec,
    OnlinePass,
    new_counters,
)


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
    run = OnlinePass(y, eta, schedule, decay, deadline)
    etas = run.etas
    W = fmap.sample(rng, r)
    features_sampled = len(W)
    train_evals = 0  # counted in the loop (docs/budgets.md)
    inv_sqrt_r = 1.0 / math.sqrt(r)
    beta = np.zeros(r)
    point = fmap.point
    for t in run.rounds():
        z = point(X[t], W)
        z *= inv_sqrt_r
        train_evals += z.size
        yhat = float(beta @ z)
        if run.diverges(t, yhat):
            break
        if lam:
            beta *= 1.0 - etas[t] * lam
        z *= etas[t] * (yhat - run.y[t])
        beta -= z
    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled)
    return run.result(FeatureExpansion(W, beta * inv_sqrt_r, fmap), counters)


SPEC = LearnerSpec(
    name="fixed_random",
    label="Fixed-Random",
    short="FR",
    summary="Rahimi & Recht random features, one SGD pass",
    fit=fit,
    params=(
        *STEP_PARAMS,
        Param("lam", "float", 0.0, "l2 regularization lambda", min=0, key_omit=0.0),
    ),
    budget=BudgetSize(
        "r",
        cost=lambda match, T: T if match == "evaluations" else 1,
        expected=lambda r, T: {"train_evals": r * T, "features_sampled": r},
        doc="random features drawn once, each evaluated on every x_t",
        default=100,
    ),
    memory=lambda r, T, w: 8 * (r * (w + 3) + 2 * T),
    engines={"jax": ".fixed_random_jax"},  # the same pass on the jax engine
    kernel_blocks=False,  # a feature expansion evaluates itself
    # ~2 ns per evaluation and number of w (T = 4 000, r = 2 000: 0.1 s coordinate, 0.15 s relu)
    seconds=lambda r, T, w, args, kv: 1e-5 * T + 2e-9 * r * T * (4 + w),
)
