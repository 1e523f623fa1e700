"""Engines: the implementations a run can use for its learners' passes.

- ``numpy`` (the default): each learner's ``fit`` (its spec's ``fit``), one cell at a time —
  the readable reference implementation of every algorithm.
- ``jax``: the same passes written for JAX (float64), run in *lockstep batches*: the cells that
  share a shape (learner, T, budget size and the learner's other static settings, feature map,
  padded input width) run as one compiled program, ``vmap`` over the cells and ``lax.scan`` over
  the rounds (:mod:`ilnrun.engines.jax_runner`). Each learner's jax pass lives next to it, in the
  module its spec names under ``engines["jax"]``; each feature map's jax twin is a set of methods
  of its class (``jax_sample``, ``jax_point``, ``jax_pairs``, ``from_jax``).

A learner's jax module provides (all per cell; the runner ``vmap``-s them):

- ``static(args) -> tuple``: the settings that fix the compiled program (sizes, flags);
- ``inputs(args, T) -> dict[str, ndarray]``: the cell's traced numbers (step sizes per round, ...);
- ``init(st, T, width, fmap_cls, data, cell) -> carry`` and
  ``step(st, T, width, fmap_cls, data, cell, carry, t) -> carry``: one round of the pass, the
  round's randomness from ``fold_in(cell["key"], t)``; a cell that diverged (or has played its
  ``T`` rounds) leaves its carry unchanged;
- ``fixup(st, carry) -> carry`` (optional): batch-level maintenance after a round;
- ``result(st, args, out, fmap, T) -> FitResult``: the numpy ``FitResult`` of one cell from its
  final carry (numpy arrays).

``data`` holds what the cells of a batch share, stored once: ``X`` (instances, T, width) padded
training inputs, ``y`` (instances, T), ``fmap`` (per-instance numbers of the feature map), and
``K`` (instances, T, T) training kernels for learners whose spec ``needs_kernel``.
"""

from __future__ import annotations

ENGINES = ("numpy", "jax")
DEFAULT_ENGINE = "numpy"


def jax_available() -> bool:
    """Whether ``jax`` can be imported (the ``jax`` / ``gpu`` extras)."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def engine_of(cfg: dict) -> str:
    """The engine of a resolved config (``numpy`` when it names none)."""
    return cfg.get("engine", DEFAULT_ENGINE)
