"""A toy learner, written as a new contributor would: one module with ``fit`` and ``SPEC``.

Averaged SGD on ``q`` fixed random features (Polyak averaging of Fixed-Random's iterates): a
budgeted competitor with a new kind of budget size, ``q``, spending ``q`` evaluations a round.
Registered in a test with one line: ``LEARNERS["toy_avg"] = SPEC``.
"""

from __future__ import annotations

import math

import numpy as np

from ilnrun.features import FeatureMap
from ilnrun.learners.base import (
    STEP_PARAMS,
    BudgetSize,
    FeatureExpansion,
    FitResult,
    LearnerSpec,
    is_divergent,
    new_counters,
)
from ilnrun.params import Param
from ilnrun.schedules import step_sizes


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    q: int,
    tail: float = 0.5,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """SGD on ``z(x) = psi(x; W) / sqrt(q)``; predicts with the mean of the iterates of the
    last ``tail`` fraction of the pass."""
    T = len(y)
    etas = step_sizes(schedule, eta, T, decay)
    W = fmap.sample(rng, q)
    beta, avg, n_avg = np.zeros(q), np.zeros(q), 0
    losses = np.empty(T)
    counters = new_counters()
    counters["features_sampled"] = q
    start = int((1.0 - tail) * T)
    for t in range(T):
        z = fmap.point(X[t], W) / math.sqrt(q)
        counters["train_evals"] += q
        yhat = float(beta @ z)
        losses[t] = 0.5 * (yhat - y[t]) ** 2
        if is_divergent(yhat):
            return FitResult(FeatureExpansion(W, avg, fmap), losses[: t + 1], counters, True)
        beta -= etas[t] * (yhat - y[t]) * z
        if t >= start:
            n_avg += 1
            avg += (beta - avg) / n_avg
    return FitResult(FeatureExpansion(W, avg / math.sqrt(q), fmap), losses, counters)


SPEC = LearnerSpec(
    name="toy_avg",
    label="Toy averaged SGD",
    short="TOY",
    summary="averaged SGD on q fixed random features (a test's toy learner)",
    fit=fit,
    params=(
        *STEP_PARAMS,
        Param("tail", "float", 0.5, "averaged fraction of the pass", min=0, key_omit=0.5),
    ),
    budget=BudgetSize(
        "q",
        cost=lambda match, T: T if match == "evaluations" else 1,
        expected=lambda q, T: {"train_evals": q * T, "features_sampled": q},
    ),
)
