"""Kernel OGD on the jax engine — the exact-kernel oracle (Zinkevich 2003), one round per scan
step, with the instance's training kernel ``K = k(X_train, X_train)`` computed once by the feature
map in numpy (the same numbers as the numpy engine's kernel blocks):

    yhat_t  = sum_{i<t} alpha_i K[t, i]      (alpha_i = 0 for i >= t)
    alpha_t = eta_t (y_t - yhat_t)

and with ``shrink``, Shrinking Gradient's rule on the exact prediction: where
``|yhat_t| >= 16 B``, ``alpha <- alpha / 4`` (exact in floating point, as the numpy pass's) and
no step. The theory preset arrives as the numpy pass's ``fit`` keywords (``eta = B/sqrt(T)``).

Counters: ``kernel_evals = sum_t t`` over the rounds played; ``shrinks``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..jax_ops import tree_dot
from ..schedules import step_sizes
from .base import DIVERGENCE_BOUND, FitResult, KernelExpansion, new_counters
from .jax_pass import Round
from .kernel_ogd import Settings
from .shrinking_gradient import SHRINK_BOUND


class Static(NamedTuple):
    """Whether the shrink rule is on (one program per ``T`` and ``shrink``)."""

    shrink: bool = False


class State(NamedTuple):
    """``alpha`` (``T``; 0 for rounds not played), the losses, the counters and the flags."""

    alpha: jnp.ndarray
    losses: jnp.ndarray
    kernel_evals: jnp.ndarray
    shrinks: jnp.ndarray
    rounds: jnp.ndarray
    alive: jnp.ndarray
    diverged: jnp.ndarray


def static(args: dict) -> Static:
    """``shrink`` of the cell's settings (:data:`ilnrun.learners.kernel_ogd.Settings`)."""
    return Static(shrink=bool(Settings.of(args).shrink))


def inputs(args: dict, T: int) -> dict[str, np.ndarray]:
    """``eta_t`` for every round and ``B``, from the cell's settings (their defaults the
    spec's)."""
    hp = Settings.of(args)
    etas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
    return {"etas": np.asarray(etas, dtype=np.float64), "B": np.float64(hp.B)}


def init(ctx: Round) -> State:
    T = ctx.T
    return State(
        alpha=jnp.zeros(T),
        losses=jnp.zeros(T),
        kernel_evals=jnp.int64(0),
        shrinks=jnp.int64(0),
        rounds=jnp.int64(0),
        alive=jnp.bool_(True),
        diverged=jnp.bool_(False),
    )


def step(ctx: Round, c: State, t) -> State:
    """Round ``t`` of kernel OGD."""
    T, data, cell = ctx.T, ctx.data, ctx.cell
    inst = cell["inst"]
    tt = jnp.minimum(t, T - 1)
    y_t = data["y"][inst, tt]
    valid = c.alive & (t < T)
    yhat = tree_dot(data["K"][inst, tt], c.alpha)
    div = ~(jnp.abs(yhat) <= DIVERGENCE_BOUND)
    update = valid & ~div
    a_t = cell["etas"][tt] * (y_t - yhat)
    alpha = c.alpha
    shrunk = jnp.bool_(False)
    if ctx.static.shrink:
        shrunk = update & (jnp.abs(yhat) >= SHRINK_BOUND * cell["B"])
        update = update & ~shrunk
        alpha = jnp.where(shrunk, alpha / 4.0, alpha)
    return State(
        alpha=alpha.at[tt].set(jnp.where(update, a_t, alpha[tt])),
        losses=c.losses.at[tt].set(jnp.where(valid, 0.5 * (yhat - y_t) ** 2, 0.0)),
        kernel_evals=c.kernel_evals + jnp.where(valid, t, 0),
        shrinks=c.shrinks + shrunk,
        rounds=c.rounds + valid,
        alive=c.alive & ~(valid & div),
        diverged=c.diverged | (valid & div),
    )


def result(st: Static, args: dict, out: State, fmap, T: int) -> FitResult:
    n = int(out.rounds)
    diverged = bool(out.diverged)
    counters = new_counters()
    counters["kernel_evals"] = int(out.kernel_evals)
    counters["shrinks"] = int(out.shrinks)
    return FitResult(
        KernelExpansion(out.alpha[:n]),
        out.losses[:n],
        counters,
        diverged,
        n < T and not diverged,
    )
