"""The protocol of a learner's pass on the jax engine (docs/architecture.md §8).

A learner's spec names its jax module in ``engines["jax"]``; the module follows
:class:`JaxPass`. Everything is per cell: the engine (:mod:`ilnrun.engines.jax_runner`) applies
``vmap`` over the cells of a batch and ``lax.scan`` over the rounds.

- ``static(args) -> Static``: the settings that fix the compiled program (sizes, flags), a
  ``NamedTuple`` of the module (hashable: it keys the compiled programs);
- ``inputs(args, T) -> dict``: the cell's traced numbers (step sizes per round, ...);
- ``init(ctx) -> State`` and ``step(ctx, state, t) -> State``: the pass's state, a
  ``NamedTuple`` of arrays of the module, before round 1 and after round ``t`` (0-based), given
  the round's context ``ctx`` (:class:`Round`); the round's randomness comes from
  ``fold_in(ctx.cell["key"], t)``; a cell that diverged, or has played its ``T`` rounds, leaves
  its state unchanged;
- ``fixup(static, state) -> State`` (optional): batch-level upkeep after each round (the state
  has the batch as its first axis);
- ``result(static, args, out, fmap, T) -> FitResult``: the numpy result of one cell from its
  final state ``out`` (the same ``NamedTuple``, holding numpy arrays).

This module imports no jax: it only names the protocol.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np

from .base import FitResult


class Round(NamedTuple):
    """What a cell's round sees besides its state.

    - ``static``: the module's static settings (its ``Static`` tuple);
    - ``T``: the rounds of the pass; ``width``: the padded input width;
    - ``fmap_cls``: the feature map's class (its jax twin: ``jax_sample``, ``jax_point``,
      ``jax_pairs``);
    - ``data``: what the batch shares: ``X`` (instances, T, width), ``y`` (instances, T), ``fmap``
      (the map's per-instance numbers) and ``K`` (instances, T, T) for learners whose spec
      ``needs_kernel``;
    - ``cell``: the cell's own numbers: ``inst`` (its instance's index), ``key`` (its jax key)
      and the module's ``inputs``.
    """

    static: Any
    T: int
    width: int
    fmap_cls: type
    data: dict
    cell: dict

    def fmap_params(self) -> dict:
        """The feature map's numbers for this cell's instance (``p`` of the jax twin)."""
        return {k: v[self.cell["inst"]] for k, v in self.data["fmap"].items()}


class JaxPass(Protocol):
    """A learner's pass on the jax engine (see the module docstring)."""

    def static(self, args: dict) -> tuple: ...

    def inputs(self, args: dict, T: int) -> dict[str, np.ndarray]: ...

    def init(self, ctx: Round) -> tuple: ...

    def step(self, ctx: Round, state: tuple, t: Any) -> tuple: ...

    def result(self, static: tuple, args: dict, out: tuple, fmap: Any, T: int) -> FitResult: ...
