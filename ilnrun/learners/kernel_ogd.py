"""Kernel online gradient descent — the exact-kernel oracle (docs/algorithms.md §4; Zinkevich 2003).

The "kernel trick" reference of the ILN paper: the same online gradient descent as Shrinking
Gradient, with exact kernel values and no budget:

    yhat_t  = sum_{i<t} alpha_i k(x_i, x_t)
    alpha_t = eta_t (y_t - yhat_t)

Only for feature maps with a closed-form kernel. It evaluates no random feature; it counts the
kernel values it uses (``kernel_evals``). Past ``T`` = 20 000 rounds, for a map with an exact
finite primal ``k(x, x') = c phi(x) . phi(x')`` (coordinate), the same predictions are made as
``yhat_t = c v . phi(x_t)`` with ``v = sum_{i<t} alpha_i phi(x_i)``: O(T D) instead of the kernel
rows' O(T^2 D), equal to rounding; ``kernel_evals`` still counts the ``t`` kernel values each
prediction stands for (docs/protocol.md §3.1).
"""

from __future__ import annotations

import numpy as np

from ..features import FeatureMap
from ..theory import primal_evaluation
from .base import (
    STEP_PARAMS,
    FitResult,
    KernelExpansion,
    LearnerSpec,
    OnlinePass,
    new_counters,
)

BLOCK = 512  # kernel rows computed at once: memory O(BLOCK * T)


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    schedule: str = "constant",
    decay: float | None = None,
    deadline: float | None = None,
) -> FitResult:
    """One online pass of kernel OGD on the squared loss."""
    run = OnlinePass(y, eta, schedule, decay, deadline)
    T, etas = run.T, run.etas
    alpha = np.zeros(T)
    counters = new_counters()
    K = None
    primal = fmap.primal(X) if primal_evaluation(fmap, T) else None
    v = np.zeros(primal[0].shape[1]) if primal is not None else None
    for t in run.rounds():
        if primal is not None:  # the same prediction in the primal
            if t:
                v += alpha[t - 1] * primal[0][t - 1]
            counters["kernel_evals"] += t
            yhat = primal[1] * float(primal[0][t] @ v)
        else:
            if t % BLOCK == 0:
                K = fmap.kernel(X[t : t + BLOCK], X[: t + BLOCK])
            k_t = K[t % BLOCK, :t]
            counters["kernel_evals"] += k_t.size
            yhat = float(k_t @ alpha[:t])
        if run.diverges(t, yhat):
            break
        alpha[t] = etas[t] * (run.y[t] - yhat)
    return run.result(KernelExpansion(alpha[: len(run.losses)]), counters)


SPEC = LearnerSpec(
    name="kernel_ogd",
    label="Kernel OGD (exact kernel, no budget)",
    short="KOGD",
    summary="exact-kernel OGD oracle (not budget-limited)",
    fit=fit,
    params=STEP_PARAMS,
    role="reference",
    choices=(
        "Kernel OGD uses the exact kernel and no feature budget; it is a reference, not a "
        "competitor.",
    ),
    needs_kernel=True,
    # its online predictions are exact: the regret uses the pass's own losses
    exact_online_loss=lambda res, K, y: float(np.sum(res.losses)),
    # a block of BLOCK kernel rows and the map's temporaries while it is formed (measured peak
    # RSS with relu: 7.1 blocks at T = 40 000)
    memory=lambda size, T, w: 8 * (7 * BLOCK * T + 3 * T),
    engines={"jax": ".kernel_ogd_jax"},  # the same pass on the jax engine
    seconds=lambda size, T, w, args, kv: 2e-5 * T + T * (T - 1) // 2 * kv,
)
