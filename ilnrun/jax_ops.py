"""Reductions whose result does not depend on the batch a cell runs in.

XLA picks its reduction and dot kernels by shape: the same row summed inside a batch of 1 and a
batch of 50 can differ in the last bit. The jax engine promises that a cell's numbers do not
depend on its batch, so its learners sum with :func:`tree_sum`, a fixed pairwise tree of
elementwise additions (each exact IEEE arithmetic, whatever the batch): ``x`` is zero-padded to
a power of two ``2^L`` and halved ``L`` times, ``x <- x[:h] + x[h:]`` — the same ``n - 1``
additions as any sum, in an order fixed by ``n`` alone.
"""

from __future__ import annotations

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
