"""Reductions whose result does not depend on the batch a cell runs in, and a search.

XLA picks its reduction and dot kernels by shape: the same row summed inside a batch of 1 and a
batch of 50 can differ in the last bit. The jax engine promises that a cell's numbers do not
depend on its batch, so its learners sum with :func:`tree_sum`, a fixed pairwise tree of
elementwise additions (each exact IEEE arithmetic, whatever the batch): ``x`` is zero-padded to
a power of two ``2^L`` and halved ``L`` times, ``x <- x[:h] + x[h:]`` — the same ``n - 1``
additions as any sum, in an order fixed by ``n`` alone.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def tree_sum(x, axis: int = -1):
    """``sum(x, axis)`` by a fixed pairwise tree (see the module docstring)."""
    x = jnp.moveaxis(x, axis, -1)
    n = x.shape[-1]
    p = 1 << max(0, (n - 1).bit_length())
    if p != n:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, p - n)])
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = x[..., :h] + x[..., h:]
    return x[..., 0]


def tree_dot(a, b):
    """``a . b`` over the last axis, summed by :func:`tree_sum`."""
    return tree_sum(a * b)


# jax's search method by backend (``None``: by the backend; a bench may set one to compare):
# the same binary search, hence the same indices, either way
SEARCH_METHOD: str | None = None


def search_method() -> str:
    """``scan`` (a loop) on CPU, where it is about twice as fast as the unrolled search;
    ``scan_unrolled`` elsewhere. On a GPU the search's loop (~17 trips a round at T = 10^5) was
    the only loop inside a Shrinking Gradient round, each trip its own step, and the rounds were
    bound by latency: 347 us a round of one cell, 439 us of 8 cells batched, on an H100."""
    if SEARCH_METHOD is not None:
        return SEARCH_METHOD
    return "scan" if jax.default_backend() == "cpu" else "scan_unrolled"


def search_right(cum, keys):
    """``searchsorted(cum, keys, side="right")``: for each key, how many of the sorted ``cum``
    are at most it, by jax's binary search in the form :func:`search_method` names."""
    return jnp.searchsorted(cum, keys, side="right", method=search_method())
