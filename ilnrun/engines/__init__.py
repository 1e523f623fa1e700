"""Engines: how the pending cells of a run are executed, chosen in one place (:func:`execute`).

Every engine stands on :mod:`ilnrun.cell` (the plan, the numeric guard, evaluation, row and
record of one cell); engines are peers and never import each other. The engine names are
declared with the config's keys (:data:`ilnrun.config.schema.ENGINES`).

- ``numpy`` (the default, :mod:`ilnrun.engines.local`): each learner's ``fit`` (its spec's
  ``fit``), one cell at a time, in this process or in joblib / dask workers — the readable
  reference implementation of every algorithm.
- ``jax``: the same passes written for JAX (float64), run in *lockstep batches*: the cells that
  share a shape (learner, T, budget size and the learner's other static settings, feature map,
  padded input width) run as one compiled program, ``vmap`` over the cells and ``lax.scan`` over
  the rounds (:mod:`ilnrun.engines.jax_runner`). Each learner's jax pass lives next to it, in the
  module its spec names under ``engines["jax"]``; each feature map's jax twin is a set of methods
  of its class (``jax_sample``, ``jax_point``, ``jax_pairs``, ``from_jax``).

A learner's jax module provides (all per cell; the runner ``vmap``-s them):

- ``static(args) -> tuple``: the settings that fix the compiled program (sizes, flags);
- ``inputs(args, T) -> dict[str, ndarray]``: the cell's traced numbers (step sizes per round, ...);
- ``init(ctx) -> state`` and ``step(ctx, state, t) -> state``: the pass's typed state (a
  ``NamedTuple``) before round 1 and after round ``t``, given the round's context ``ctx``
  (:class:`ilnrun.learners.jax_pass.Round`: the static settings, ``T``, ``width``, the feature
  map's class, the batch's shared ``data`` and the ``cell``'s own inputs), the round's randomness
  from ``fold_in(cell["key"], t)``; a cell that diverged (or has played its ``T`` rounds) leaves
  its state unchanged;
- ``fixup(static, state) -> state`` (optional): batch-level maintenance after a round;
- ``result(static, args, out, fmap, T) -> FitResult``: the numpy ``FitResult`` of one cell from
  its final state (numpy arrays).

The protocol is :class:`ilnrun.learners.jax_pass.JaxPass`.

``data`` holds what the cells of a batch share, stored once: ``X`` (instances, T, width) padded
training inputs, ``y`` (instances, T), ``fmap`` (per-instance numbers of the feature map), and
``K`` (instances, T, T) training kernels for learners whose spec ``needs_kernel``.
"""

from __future__ import annotations

from ..config import Cell, Experiment
from ..config.schema import DEFAULT_ENGINE, ENGINES, engine_of
from .local import Progress, WorkerLost, execute_local

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Progress",
    "WorkerLost",
    "engine_of",
    "execute",
    "jax_available",
]


def jax_available() -> bool:
    """Whether ``jax`` can be imported (the ``jax`` / ``gpu`` extras)."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def execute(
    exp: Experiment,
    pending: list[Cell],
    jobs: int,
    backend: str,
    on_record,
    one_at_a_time: frozenset[str] = frozenset(),
) -> None:
    """Run ``pending`` cells on the experiment's engine (``exp.engine``) and hand each record to
    ``on_record`` as it finishes.

    ``numpy``: :func:`ilnrun.engines.local.execute_local` (``jobs`` workers of ``backend``, the
    cells of ``one_at_a_time`` one after another in this process);
    ``jax``: :func:`ilnrun.engines.jax_runner.execute_jax`, lockstep batches in this process
    (``jobs`` and ``backend`` do not apply). The jax engine's module is imported here, when it
    runs, because it imports JAX, an optional dependency."""
    if not pending:
        return
    if exp.engine == "jax":
        from .jax_runner import execute_jax

        execute_jax(exp, pending, on_record)
    elif exp.engine == "numpy":
        execute_local(exp, pending, jobs, backend, on_record, one_at_a_time)
    else:
        raise ValueError(f"unknown engine {exp.engine!r}; expected one of {ENGINES}")
