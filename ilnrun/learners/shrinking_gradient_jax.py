"""Shrinking Gradient on the jax engine — ILN paper Algorithms 1 and 2, one round per scan step.

The same pass as :func:`ilnrun.learners.shrinking_gradient.fit` (read that module first), with
fixed-size arrays of length ``T`` and masks instead of appends:

- ``alpha = s * a`` with a global scale ``s`` (a shrink is ``s <- s / 4``);
- ``cum[i] = sum_{j <= i} |a_j|`` for the rounds played, ``+inf`` after them, so the ``m`` draws
  ``i ~ q(i) = |alpha_i| / |alpha|_1`` of Algorithm 2 are ``searchsorted(cum, u |a|_1, "right")``
  with ``u ~ U[0, 1)^m``, clamped to ``t - 1`` (as numpy's search of ``cum[:t-1]``);
- ``E_t = s |a|_1 / m * sum_k sgn(a_i) psi(x_i; w_k) psi(x_t; w_k)`` (``0`` while ``a = 0``);
- Algorithm 1: ``alpha_t = eta_t (y_t - E_t)`` if ``|E_t| < 16 B`` (gradient *descent*, the
  paper's erratum; ``printed_sign`` flips it), else ``s <- s / 4``;
- the averaged predictor of Corollary 1 from ``alpha_t`` as appended and the shrinks before each
  round, with numpy's :func:`~ilnrun.learners.shrinking_gradient.average_weights`;
- a non-finite ``E_t`` or ``|E_t| > 1e6`` stops the cell: later rounds leave it unchanged;
- when ``s`` falls below ``RESCALE_BELOW`` the scale is folded into ``a`` (batch-level
  :func:`fixup`, a real branch taken only when some cell needs it).

Counters: ``features_sampled = m * R`` and ``train_evals = 2 m * R`` with ``R`` the rounds that
drew (those with ``alpha != 0``), as numpy counts them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..jax_ops import search_right, tree_dot
from ..schedules import step_sizes
from .base import DIVERGENCE_BOUND, FitResult, KernelExpansion, new_counters
from .jax_pass import Round
from .shrinking_gradient import RESCALE_BELOW, SHRINK_BOUND, Settings, average_weights


class Static(NamedTuple):
    """What fixes the compiled program: Algorithm 2's samples ``m``, the sampler and the sign."""

    m: int
    sampler: str
    printed_sign: bool


class State(NamedTuple):
    """The pass's state (arrays of length ``T`` unless noted): ``a`` (``alpha = s a``), ``cum``
    (running ``|a|_1``, ``+inf`` after the rounds played), ``alpha_new`` (``alpha_t`` as
    appended), ``shrinks_before`` (shrinks before each round), ``alpha_l1`` (``|alpha|_1`` after
    each round), ``losses``; scalars ``s``, ``total`` (``|a|_1``), ``shrinks``, ``draws``
    (rounds that drew), ``rounds``, ``alive``, ``diverged``."""

    a: jnp.ndarray
    cum: jnp.ndarray
    alpha_new: jnp.ndarray
    shrinks_before: jnp.ndarray
    alpha_l1: jnp.ndarray
    losses: jnp.ndarray
    s: jnp.ndarray
    total: jnp.ndarray
    shrinks: jnp.ndarray
    draws: jnp.ndarray
    rounds: jnp.ndarray
    alive: jnp.ndarray
    diverged: jnp.ndarray


def static(args: dict) -> Static:
    """``m``, the sampler and the printed sign of the cell's settings
    (:data:`ilnrun.learners.shrinking_gradient.Settings`)."""
    hp = Settings.of(args)
    return Static(m=int(hp.m), sampler=hp.sampler, printed_sign=bool(hp.printed_sign))


def inputs(args: dict, T: int) -> dict[str, np.ndarray]:
    """The cell's traced numbers: ``eta_t`` for every round and ``B`` (the settings' defaults
    the spec's)."""
    hp = Settings.of(args)
    etas = step_sizes(hp.schedule, hp.eta, T, hp.decay)
    return {"etas": np.asarray(etas, dtype=np.float64), "B": np.float64(hp.B)}


def init(ctx: Round) -> State:
    """The state before round 1: ``alpha = 0``, ``s = 1``."""
    T = ctx.T
    f, i = jnp.zeros(T), jnp.zeros(T, dtype=jnp.int64)
    return State(
        a=f,
        cum=jnp.full(T, jnp.inf),
        alpha_new=f,
        shrinks_before=i,
        alpha_l1=f,
        losses=f,
        s=jnp.float64(1.0),
        total=jnp.float64(0.0),
        shrinks=jnp.int64(0),
        draws=jnp.int64(0),
        rounds=jnp.int64(0),
        alive=jnp.bool_(True),
        diverged=jnp.bool_(False),
    )


def draws(st: Static, width: int, fmap_cls, p: dict, key) -> tuple:
    """Round randomness: ``u`` (``m`` uniforms, or systematic ``(k + U) / m``) and ``w ~ mu``."""
    ku, kw = jax.random.split(key)
    if st.sampler == "systematic":
        u = (jnp.arange(st.m) + jax.random.uniform(ku, ())) / st.m
    else:
        u = jax.random.uniform(ku, (st.m,))
    return u, fmap_cls.jax_sample(kw, st.m, width, p)


def round_given(ctx: Round, c: State, t, u, w) -> State:
    """Round ``t`` (0-based) of Algorithm 1 given its draws ``u`` (uniforms in [0, 1)) and
    ``w``: Algorithm 2's estimate ``E_t``, the loss, then the gradient step or the shrink."""
    m, printed = ctx.static.m, ctx.static.printed_sign
    T, data, cell = ctx.T, ctx.data, ctx.cell
    inst = cell["inst"]
    X = data["X"]
    y_t = data["y"][inst, t]
    eta_t = cell["etas"][t]
    valid = c.alive & (t < T)
    has = c.total > 0.0
    # --- Algorithm 2: EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m) -------------------------------
    keys = u * c.total
    i = jnp.clip(search_right(c.cum, keys), 0, jnp.maximum(t - 1, 0))
    psi_i = ctx.fmap_cls.jax_pairs(X, inst, i, w)
    psi_t = ctx.fmap_cls.jax_point(X[inst, t], w)
    dot = tree_dot(jnp.sign(c.a[i]) * psi_i, psi_t)
    E = jnp.where(has, c.s * c.total / m * dot, 0.0)
    loss = 0.5 * (E - y_t) ** 2
    div = ~(jnp.abs(E) <= DIVERGENCE_BOUND)
    update = valid & ~div
    # --- Algorithm 1: gradient step or shrink -------------------------------------------------
    step_ok = jnp.abs(E) < SHRINK_BOUND * cell["B"]
    sign = -1.0 if printed else 1.0
    step = sign * eta_t * (y_t - E)
    a_t = step / c.s
    take = update & step_ok
    shrink = update & ~step_ok
    total = jnp.where(take, c.total + jnp.abs(a_t), c.total)
    s = jnp.where(shrink, c.s / 4.0, c.s)
    tt = jnp.minimum(t, T - 1)  # (t < T whenever the writes are kept)
    return State(
        a=c.a.at[tt].set(jnp.where(take, a_t, c.a[tt])),
        cum=c.cum.at[tt].set(jnp.where(update, total, c.cum[tt])),
        alpha_new=c.alpha_new.at[tt].set(jnp.where(take, step, c.alpha_new[tt])),
        shrinks_before=c.shrinks_before.at[tt].set(
            jnp.where(valid, c.shrinks, c.shrinks_before[tt])
        ),
        alpha_l1=c.alpha_l1.at[tt].set(jnp.where(update, s * total, c.alpha_l1[tt])),
        losses=c.losses.at[tt].set(jnp.where(valid, loss, c.losses[tt])),
        s=s,
        total=total,
        shrinks=c.shrinks + shrink,
        draws=c.draws + (valid & has),
        rounds=c.rounds + valid,
        alive=c.alive & ~(valid & div),
        diverged=c.diverged | (valid & div),
    )


def step(ctx: Round, c: State, t) -> State:
    """Round ``t``: its draws from ``fold_in(key, t)``, then :func:`round_given`."""
    key = jax.random.fold_in(ctx.cell["key"], t)
    u, w = draws(ctx.static, ctx.width, ctx.fmap_cls, ctx.fmap_params(), key)
    return round_given(ctx, c, t, u, w)


def _fold(c: State) -> State:
    """Fold the scale into the coefficients when ``s < RESCALE_BELOW`` (one cell)."""
    need = c.s < RESCALE_BELOW
    a = c.a * c.s
    played = jnp.isfinite(c.cum)
    cum = jnp.where(played, jnp.cumsum(jnp.abs(a)), jnp.inf)
    total = jnp.max(jnp.where(played, cum, 0.0))
    return c._replace(
        a=jnp.where(need, a, c.a),
        cum=jnp.where(need, cum, c.cum),
        total=jnp.where(need, total, c.total),
        s=jnp.where(need, 1.0, c.s),
    )


def fixup(st: Static, c: State) -> State:
    """Batch level, after a round: fold the scale of the cells that need it (a real branch,
    taken only when one does: O(T) work per cell then, none otherwise)."""
    return lax.cond(jnp.any(c.s < RESCALE_BELOW), jax.vmap(_fold), lambda x: x, c)


def result(st: Static, args: dict, out: State, fmap, T: int) -> FitResult:
    """The numpy :class:`FitResult` of one cell from its final state."""
    m = st.m
    n = int(out.rounds)
    diverged = bool(out.diverged)
    counters = new_counters()
    draws_ = int(out.draws)
    counters.update(
        train_evals=2 * m * draws_, features_sampled=m * draws_, shrinks=int(out.shrinks)
    )
    shrinks_before = out.shrinks_before[:n].astype(np.int64)
    extras = {
        "alpha_l1": out.alpha_l1[:n],
        "alpha_new": out.alpha_new[:n],
        "shrinks_before": shrinks_before,
    }
    return FitResult(
        KernelExpansion(float(out.s) * out.a[:n]),
        out.losses[:n],
        counters,
        diverged,
        n < T and not diverged,
        KernelExpansion(out.alpha_new[:n] * average_weights(shrinks_before)),
        extras,
    )
