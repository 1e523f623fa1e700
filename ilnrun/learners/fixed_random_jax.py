"""Fixed-Random features on the jax engine — Rahimi & Recht, one SGD pass (ILN paper Section 6).

The same pass as :func:`ilnrun.learners.fixed_random.fit`: ``r`` parameters drawn once (from
the first split of the cell's key), ``z(x) = psi(x; W) / sqrt(r)`` and

    yhat_t = beta . z(x_t)
    beta  <- (1 - eta_t lam) beta - eta_t (yhat_t - y_t) z(x_t)

Counters: ``train_evals = r`` per round played, ``features_sampled = r``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..jax_ops import tree_dot
from ..schedules import step_sizes
from .base import DIVERGENCE_BOUND, FeatureExpansion, FitResult, new_counters


def static(args: dict) -> tuple:
    """``(r, lam != 0)``."""
    return (int(args["r"]), bool(args.get("lam", 0.0)))


def inputs(args: dict, T: int) -> dict[str, np.ndarray]:
    """``eta_t`` for every round and ``lam``."""
    etas = step_sizes(args.get("schedule", "constant"), args["eta"], T, args.get("decay"))
    return {"etas": np.asarray(etas, dtype=np.float64), "lam": np.float64(args.get("lam", 0.0))}


def draw(st: tuple, width: int, fmap_cls, p: dict, key):
    """The ``r`` fixed parameters, from the cell key's first split."""
    return fmap_cls.jax_sample(jax.random.split(key)[0], st[0], width, p)


def init(st: tuple, T: int, width: int, fmap_cls, data: dict, cell: dict) -> dict:
    """Draw ``W``; ``beta = 0``."""
    p = {key: v[cell["inst"]] for key, v in data["fmap"].items()}
    return start(st, T, draw(st, width, fmap_cls, p, cell["key"]))


def start(st: tuple, T: int, W) -> dict:
    """The state before round 1 for drawn parameters ``W``."""
    return {
        "W": W,
        "beta": jnp.zeros(st[0]),
        "losses": jnp.zeros(T),
        "rounds": jnp.int64(0),
        "alive": jnp.bool_(True),
        "diverged": jnp.bool_(False),
    }


def step(st: tuple, T: int, width: int, fmap_cls, data: dict, cell: dict, c: dict, t) -> dict:
    """Round ``t`` of SGD on the squared loss."""
    r, use_lam = st
    inst = cell["inst"]
    y_t = data["y"][inst, t]
    eta = cell["etas"][t]
    valid = c["alive"] & (t < T)
    z = fmap_cls.jax_point(data["X"][inst, t], c["W"]) * (1.0 / math.sqrt(r))
    yhat = tree_dot(c["beta"], z)
    div = ~(jnp.abs(yhat) <= DIVERGENCE_BOUND)
    update = valid & ~div
    beta = c["beta"] * (1.0 - eta * cell["lam"]) if use_lam else c["beta"]
    beta = beta - z * (eta * (yhat - y_t))
    tt = jnp.minimum(t, T - 1)
    loss = 0.5 * (yhat - y_t) ** 2
    return {
        "W": c["W"],
        "beta": jnp.where(update, beta, c["beta"]),
        "losses": c["losses"].at[tt].set(jnp.where(valid, loss, c["losses"][tt])),
        "rounds": c["rounds"] + valid,
        "alive": c["alive"] & ~(valid & div),
        "diverged": c["diverged"] | (valid & div),
    }


def result(st: tuple, args: dict, out: dict, fmap, T: int) -> FitResult:
    """The numpy :class:`FitResult` of one cell from its final state."""
    r = st[0]
    n = int(out["rounds"])
    diverged = bool(out["diverged"])
    counters = new_counters()
    counters.update(train_evals=r * n, features_sampled=r)
    predictor = FeatureExpansion(fmap.from_jax(out["W"]), out["beta"] / math.sqrt(r), fmap)
    return FitResult(predictor, out["losses"][:n], counters, diverged, n < T and not diverged)
