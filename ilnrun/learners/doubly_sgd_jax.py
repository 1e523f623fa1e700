"""Doubly SGD on the jax engine — Dai et al. (2014) Algorithms 1 and 2, one round per scan step.

The same pass as :func:`ilnrun.learners.doubly_sgd.fit`, with the ``k T`` feature parameters
and coefficients in fixed-size arrays (``alpha = s * c``; entries of rounds not yet played are 0):

    f(x_t)        = s * sum_j c_j psi(x_t; omega_j)              # Algorithm 2 (all k T slots)
    omega_{t,.}   ~ mu (k draws)
    alpha_{t,j}   = -gamma_t (f(x_t) - y_t) psi(x_t; omega_{t,j}) / k   # Algorithm 1, line 5
    alpha_{i,.}  <- (1 - gamma_t nu) alpha_{i,.}, i < t           # line 6, as s <- s (1 - gamma nu)

A round evaluates all ``k T`` slots (twice numpy's ``k t`` on average; the padded ones carry
``c = 0``), but counts ``k t + k`` evaluations, as numpy does.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..jax_ops import tree_dot
from ..schedules import step_sizes
from .base import DIVERGENCE_BOUND, FeatureExpansion, FitResult, new_counters
from .doubly_sgd import RESCALE_BELOW, Settings
from .jax_pass import Round


class Static(NamedTuple):
    """Features drawn per round."""

    k: int


class State(NamedTuple):
    """The ``k T`` parameter slots ``W`` and coefficients ``c`` (``alpha = s c``), the losses, the
    counters and the flags."""

    W: jnp.ndarray
    c: jnp.ndarray
    losses: jnp.ndarray
    s: jnp.ndarray
    train_evals: jnp.ndarray
    features: jnp.ndarray
    rounds: jnp.ndarray
    alive: jnp.ndarray
    diverged: jnp.ndarray


def static(args: dict) -> Static:
    """``k`` of the cell's settings (:data:`ilnrun.learners.doubly_sgd.Settings`)."""
    return Static(k=int(Settings.of(args).k))


def inputs(args: dict, T: int) -> dict[str, np.ndarray]:
    """``gamma_t`` for every round and ``nu``, from the cell's settings (their defaults the
    spec's)."""
    hp = Settings.of(args)
    gammas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
    return {"etas": np.asarray(gammas, dtype=np.float64), "nu": np.float64(hp.nu)}


def init(ctx: Round) -> State:
    """No feature yet: ``c = 0``, ``s = 1``; ``W`` holds placeholders of the map's shape."""
    k, T = ctx.static.k, ctx.T
    shape = ctx.fmap_cls.jax_sample(jnp.zeros(2, dtype=jnp.uint32), 1, ctx.width, ctx.fmap_params())
    W = jnp.zeros((k * T, *shape.shape[1:]), dtype=shape.dtype)
    return State(
        W=W,
        c=jnp.zeros(k * T),
        losses=jnp.zeros(T),
        s=jnp.float64(1.0),
        train_evals=jnp.int64(0),
        features=jnp.int64(0),
        rounds=jnp.int64(0),
        alive=jnp.bool_(True),
        diverged=jnp.bool_(False),
    )


def round_given(ctx: Round, c: State, t, omega) -> State:
    """Round ``t`` given its ``k`` drawn parameters ``omega``."""
    k, T, data, cell = ctx.static.k, ctx.T, ctx.data, ctx.cell
    inst = cell["inst"]
    x_t = data["X"][inst, t]
    y_t = data["y"][inst, t]
    gamma = cell["etas"][t]
    valid = c.alive & (t < T)
    f_t = c.s * tree_dot(c.c, ctx.fmap_cls.jax_point(x_t, c.W))
    loss = 0.5 * (f_t - y_t) ** 2
    div = ~(jnp.abs(f_t) <= DIVERGENCE_BOUND)
    update = valid & ~div
    n_old = k * jnp.minimum(t, T - 1)
    psi_new = ctx.fmap_cls.jax_point(x_t, omega) * (-gamma * (f_t - y_t))
    if k != 1:
        psi_new = psi_new / k
    factor = 1.0 - gamma * cell["nu"]
    pos = factor > 0.0
    s = jnp.where(update & pos, c.s * factor, c.s)
    coef = jnp.where(update & ~pos, c.c * factor, c.c)
    coef = lax.dynamic_update_slice(coef, jnp.where(update, psi_new / s, 0.0), (n_old,))
    W = lax.dynamic_update_slice(c.W, omega, (n_old,) + (0,) * (omega.ndim - 1))
    small = update & (s < RESCALE_BELOW)
    coef = jnp.where(small, coef * s, coef)
    s = jnp.where(small, 1.0, s)
    tt = jnp.minimum(t, T - 1)
    return State(
        W=jnp.where(update, W, c.W),
        c=coef,
        losses=c.losses.at[tt].set(jnp.where(valid, loss, c.losses[tt])),
        s=s,
        train_evals=c.train_evals + jnp.where(valid, k * t, 0) + jnp.where(update, k, 0),
        features=c.features + jnp.where(update, k, 0),
        rounds=c.rounds + valid,
        alive=c.alive & ~(valid & div),
        diverged=c.diverged | (valid & div),
    )


def step(ctx: Round, c: State, t) -> State:
    """Round ``t``: ``omega ~ mu`` from ``fold_in(key, t)``, then :func:`round_given`."""
    key = jax.random.fold_in(ctx.cell["key"], t)
    omega = ctx.fmap_cls.jax_sample(key, ctx.static.k, ctx.width, ctx.fmap_params())
    return round_given(ctx, c, t, omega)


def result(st: Static, args: dict, out: State, fmap, T: int) -> FitResult:
    """The numpy :class:`FitResult` of one cell from its final state."""
    k = st.k
    n = int(out.rounds)
    diverged = bool(out.diverged)
    counters = new_counters()
    counters.update(train_evals=int(out.train_evals), features_sampled=int(out.features))
    n_feat = k * n if not diverged else k * (n - 1)
    W = fmap.from_jax(out.W[:n_feat])
    predictor = FeatureExpansion(W, float(out.s) * out.c[:n_feat], fmap)
    return FitResult(predictor, out.losses[:n], counters, diverged, n < T and not diverged)
