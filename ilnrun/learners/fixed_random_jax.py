"""Fixed-Random features on the jax engine — Rahimi & Recht, one SGD pass (ILN paper Section 6).

The same pass as :func:`ilnrun.learners.fixed_random.fit`: ``r`` parameters drawn once (from
the first split of the cell's key), ``z(x) = psi(x; W) / sqrt(r)`` and

    yhat_t = beta . z(x_t)
    beta  <- (1 - eta_t lam) beta - eta_t (yhat_t - y_t) z(x_t)

Counters: ``train_evals = r`` per round played, ``features_sampled = r``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..jax_ops import tree_dot
from ..schedules import step_sizes
from .base import DIVERGENCE_BOUND, FeatureExpansion, FitResult, new_counters
from .fixed_random import Settings
from .jax_pass import Round


class Static(NamedTuple):
    """The number of fixed features and whether the ridge term is on."""

    r: int
    use_lam: bool


class State(NamedTuple):
    """The fixed parameters ``W``, the weights ``beta``, the losses, the rounds and the flags."""

    W: jnp.ndarray
    beta: jnp.ndarray
    losses: jnp.ndarray
    rounds: jnp.ndarray
    alive: jnp.ndarray
    diverged: jnp.ndarray


def static(args: dict) -> Static:
    """``r`` and whether ``lam`` is set, of the cell's settings
    (:data:`ilnrun.learners.fixed_random.Settings`)."""
    hp = Settings.of(args)
    return Static(r=int(hp.r), use_lam=bool(hp.lam))


def inputs(args: dict, T: int) -> dict[str, np.ndarray]:
    """``eta_t`` for every round and ``lam``, from the cell's settings (their defaults the
    spec's)."""
    hp = Settings.of(args)
    etas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
    return {"etas": np.asarray(etas, dtype=np.float64), "lam": np.float64(hp.lam)}


def draw(st: Static, width: int, fmap_cls, p: dict, key):
    """The ``r`` fixed parameters, from the cell key's first split."""
    return fmap_cls.jax_sample(jax.random.split(key)[0], st.r, width, p)


def init(ctx: Round) -> State:
    """Draw ``W``; ``beta = 0``."""
    W = draw(ctx.static, ctx.width, ctx.fmap_cls, ctx.fmap_params(), ctx.cell["key"])
    return start(ctx.static, ctx.T, W)


def start(st: Static, T: int, W) -> State:
    """The state before round 1 for drawn parameters ``W``."""
    return State(
        W=W,
        beta=jnp.zeros(st.r),
        losses=jnp.zeros(T),
        rounds=jnp.int64(0),
        alive=jnp.bool_(True),
        diverged=jnp.bool_(False),
    )


def step(ctx: Round, c: State, t) -> State:
    """Round ``t`` of SGD on the squared loss."""
    st, T, data, cell = ctx.static, ctx.T, ctx.data, ctx.cell
    inst = cell["inst"]
    y_t = data["y"][inst, t]
    eta = cell["etas"][t]
    valid = c.alive & (t < T)
    z = ctx.fmap_cls.jax_point(data["X"][inst, t], c.W) * (1.0 / math.sqrt(st.r))
    yhat = tree_dot(c.beta, z)
    div = ~(jnp.abs(yhat) <= DIVERGENCE_BOUND)
    update = valid & ~div
    beta = c.beta * (1.0 - eta * cell["lam"]) if st.use_lam else c.beta
    beta = beta - z * (eta * (yhat - y_t))
    tt = jnp.minimum(t, T - 1)
    loss = 0.5 * (yhat - y_t) ** 2
    return State(
        W=c.W,
        beta=jnp.where(update, beta, c.beta),
        losses=c.losses.at[tt].set(jnp.where(valid, loss, c.losses[tt])),
        rounds=c.rounds + valid,
        alive=c.alive & ~(valid & div),
        diverged=c.diverged | (valid & div),
    )


def result(st: Static, args: dict, out: State, fmap, T: int) -> FitResult:
    """The numpy :class:`FitResult` of one cell from its final state."""
    r = st.r
    n = int(out.rounds)
    diverged = bool(out.diverged)
    counters = new_counters()
    counters.update(train_evals=r * n, features_sampled=r)
    predictor = FeatureExpansion(fmap.from_jax(out.W), out.beta / math.sqrt(r), fmap)
    return FitResult(predictor, out.losses[:n], counters, diverged, n < T and not diverged)
