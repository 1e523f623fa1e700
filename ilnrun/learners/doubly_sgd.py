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
    run = OnlinePass(y, eta, schedule, decay, deadline)
    T, gammas = run.T, run.etas
    W = None  # stored omegas, allocated on the first draw (shape depends on the map)
    c = np.zeros(k * T)  # alpha = s * c
    s = 1.0
    train_evals = features_sampled = 0  # counted in the loop (docs/budgets.md)
    point, sample = fmap.point, fmap.sample

    for t in run.rounds():
        x_t, y_t = X[t], run.y[t]
        n_old = k * t
        if n_old:
            psi_old = point(x_t, W[:n_old])
            train_evals += psi_old.size
            f_t = s * float(c[:n_old] @ psi_old)
        else:
            f_t = 0.0
        if run.diverges(t, f_t):
            break
        omega = sample(rng, k)
        features_sampled += len(omega)
        if W is None:
            W = np.empty((k * T,) + omega.shape[1:], dtype=omega.dtype)
        W[n_old : n_old + k] = omega
        psi_new = point(x_t, omega)
        train_evals += psi_new.size
        # alpha_{t,.} = -gamma_t (f_t - y_t) psi_new / k, stored as c = alpha / s (in place)
        psi_new *= -gammas[t] * (f_t - y_t)
        if k != 1:  # (x / 1 is x exactly: skipping it changes no bit)
            psi_new /= k
        factor = 1.0 - gammas[t] * nu
        if factor > 0.0:
            s *= factor
        else:  # a step so large that the decay factor is not positive: apply it directly
            c[:n_old] *= factor
        if s == 1.0:  # always when nu = 0
            c[n_old : n_old + k] = psi_new
        else:
            np.divide(psi_new, s, out=c[n_old : n_old + k])
        if s < RESCALE_BELOW:
            c[: n_old + k] *= s
            s = 1.0

    counters = new_counters()
    counters.update(train_evals=train_evals, features_sampled=features_sampled)
    n_feat = k * (len(run.losses) - run.diverged)
    return run.result(FeatureExpansion(W[:n_feat], s * c[:n_feat], fmap), counters)


SPEC = LearnerSpec(
    name="doubly_sgd",
    label="Doubly SGD",
    short="DSGD",
    summary="Dai et al. (2014) Algorithms 1-2, k features per round",
    fit=fit,
    params=(
        *STEP_PARAMS,
        Param(
            "nu", "float", 0.0, "l2 regularization nu (decay 1 - gamma_t nu)", min=0, key_omit=0.0
        ),
    ),
    budget=BudgetSize(
        "k",
        # round t evaluates the k (t - 1) earlier features and its k new ones on x_t
        cost=lambda match, T: T * (T + 1) // 2 if match == "evaluations" else T,
        expected=lambda k, T: {"train_evals": k * T * (T + 1) // 2, "features_sampled": k * T},
        doc="random features drawn per round",
    ),
    # every drawn feature is kept: k T parameters and coefficients
    memory=lambda k, T, w: 8 * (k * T * (w + 2) + 2 * T),
    engines={"jax": ".doubly_sgd_jax"},  # the same pass on the jax engine
)
