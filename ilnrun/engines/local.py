"""The local engine: cells run one at a time with their numpy passes, in this process or in
worker processes (docs/architecture.md §3).

- Execution: cells go through joblib (``loky`` processes, or dask through joblib's dask backend);
  each worker caches the last few dataset instances (:func:`ilnrun.cell.instance`), and cells
  sharing an instance are dispatched consecutively. Nothing depends on the number of workers,
  the backend or the order in which cells run (seeds: :func:`ilnrun.cell.seeds`).
- Threads: BLAS and every other native thread pool run one thread inside a cell
  (:func:`ilnrun.numeric_env.one_thread`), whether the cell runs in-process (``--jobs 1``) or in
  a worker, so the numbers are bit-identical for any ``--jobs`` and backend. Loky workers exit
  when the parent process dies.
- Tasks: a worker task runs a few consecutive cells of one dataset instance (:func:`chunks`: at
  most ``CHUNK_ROUNDS`` training rounds in all, so ``CHUNK_ROUNDS / T`` cells of ``T`` rounds;
  one cell per task from ``T >= CHUNK_ROUNDS / 2``), which pays the dispatch (pickling, a
  round trip to the worker) once for the chunk instead of per cell. ``average`` twins (cells
  that differ only in ``average``) stay in one task of two cells or more: they make one pass
  (:func:`ilnrun.cell.run_cells`).
- Every finished record goes to ``on_record`` in the parent the moment its task returns (which
  appends it to ``cells.jsonl``, :mod:`ilnrun.results`), so an interrupted run resumes where it
  stopped; a kill loses at most the chunks being run.
- Memory: the cells of which ``--jobs`` at once would exceed ``limits.max_memory_gb`` (a kernel
  ridge cell on a large table beside small ones) run one after another in the parent process
  before the workers start on the others (:func:`run_alone`,
  :class:`ilnrun.cost.Schedule`); the parent then drops its cached instances.
- A cold compilation cache is filled once, in the parent, before workers start
  (:func:`warm_up`: the first cell of every learner runs in the parent), not by every worker
  at the same time.
- :class:`Progress`: cells done / total on stderr, for every engine.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import warnings

from ..cell import forget_instances, run_cell, run_cells, twins
from ..config import Cell, Experiment
from ..numeric_env import one_thread
from ..threads import threads_per_cell

__all__ = [
    "CHUNK_ROUNDS",
    "INSTANCE_ROUNDS",
    "Progress",
    "chunks",
    "execute_local",
    "loky_options",
    "one_thread",
    "run_alone",
    "warm_up",
    "worker_cell",
    "worker_cells",
]

# training rounds (summed over a task's cells) above which a task is not made longer: figure1's
# cells (T = 200) go 32 to a task (~0.1-0.4 s of work), cells of T >= 3 200 one to a task
CHUNK_ROUNDS = 6400
# ... unless all the cells of a dataset instance take at most this many rounds: they are then
# one task, so one worker builds the instance (figure1_paper_grid's 160 cells of T = 200: each
# of 2 workers built all 60 instances when the 5 tasks of an instance went to either)
INSTANCE_ROUNDS = 1 << 16
# joblib's warning when a run's generator of results is closed with tasks done but not read or
# still in flight ("4 tasks which were still being processed by the workers have been cancelled")
CANCELLED_WARNING = r"\d+ tasks (have been successfully executed|which were still being processed)"


class Progress:
    """Cells done / total, elapsed and ETA on stderr: a live bar on a terminal, a plain line every
    ~5% otherwise, nothing when quiet."""

    def __init__(self, total: int, done: int = 0, quiet: bool = False) -> None:
        self.total, self.done, self.quiet = total, done, quiet
        self.start_done = done
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.next_pct = 0

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.quiet or self.total == 0:
            return
        pct = 100 * self.done // self.total
        if not self.tty and pct < self.next_pct and self.done < self.total:
            return
        self.next_pct = pct + 5
        elapsed = time.monotonic() - self.t0
        rate = (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        msg = (
            f"{self.done}/{self.total} cells ({pct}%) elapsed {elapsed:.0f}s eta {eta:.0f}s"
            if math.isfinite(eta)
            else f"{self.done}/{self.total} cells"
        )
        if self.tty:
            bar = "#" * (30 * self.done // self.total)
            sys.stderr.write(f"\r[{bar:<30}] {msg}   ")
            if self.done >= self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()


_WATCHED_PID: int | None = None


def _watch_parent(parent: int | None = None) -> None:
    """In a worker process: exit as soon as the parent process ``parent`` (the run's process,
    passed from it) is gone — a daemon thread polls ``os.getppid()``, which changes when the
    parent dies; a worker that starts after its parent died exits at once. Started once per
    process."""
    global _WATCHED_PID
    if os.getpid() == _WATCHED_PID:
        return
    _WATCHED_PID = os.getpid()
    parent = os.getppid() if parent is None else parent
    if os.getppid() != parent:  # orphaned while starting up
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="ilnrun-parent-watchdog", daemon=True).start()


def worker_cell(exp: Experiment, cell: Cell, watch_parent: int | None = None) -> dict:
    """:func:`~ilnrun.cell.run_cell` in a worker: native thread pools pinned to one thread (as
    in-process); with ``watch_parent`` (the parent's pid) the worker exits when its parent dies."""
    if watch_parent is not None:
        _watch_parent(watch_parent)
    with one_thread():
        return run_cell(exp, cell)


def worker_cells(exp: Experiment, cells: list[Cell], watch_parent: int | None = None) -> list[dict]:
    """:func:`worker_cell` for several cells in one task: their records, in order
    (:func:`~ilnrun.cell.run_cells`: ``average`` twins from one pass)."""
    if watch_parent is not None:
        _watch_parent(watch_parent)
    with one_thread():
        return list(run_cells(exp, cells))


def _rounds(cell: Cell) -> int:
    T = cell.data.get("T")
    return T if isinstance(T, int) and T > 0 else CHUNK_ROUNDS


def chunks(pending: list[Cell], jobs: int) -> list[list[Cell]]:
    """``pending`` cut into worker tasks, in order: runs of consecutive cells of one dataset
    instance (same ``data_key``), and at most ``len(pending) / (4 jobs)`` cells so that a short
    run still keeps every worker busy to its end. Within that, the consecutive cells of an
    instance are one task when they take at most :data:`INSTANCE_ROUNDS` training rounds in all
    (the instance is then built by one worker); otherwise tasks of at most ``CHUNK_ROUNDS // T``
    cells (at least one). A task of two cells or more never ends between two ``average`` twins
    (:func:`~ilnrun.cell.twins`, which :func:`~ilnrun.cell.run_cells` runs from one pass): the
    first of them starts the next task instead."""
    cap = max(1, len(pending) // (4 * max(1, jobs)))
    out: list[list[Cell]] = []
    for run in _instance_runs(pending):
        whole = sum(_rounds(c) for c in run) <= INSTANCE_ROUNDS and len(run) <= cap
        start = len(out)
        for c in run:
            size = len(run) if whole else max(1, min(cap, CHUNK_ROUNDS // _rounds(c)))
            if len(out) > start and len(out[-1]) < size:
                out[-1].append(c)
            elif len(out) > start and len(out[-1]) >= 2 and twins(out[-1][-1], c):
                out.append([out[-1].pop(), c])
            else:
                out.append([c])
    return out


def _instance_runs(pending: list[Cell]) -> list[list[Cell]]:
    """``pending`` as runs of consecutive cells of one dataset instance (same ``data_key``)."""
    runs: list[list[Cell]] = []
    key = None
    for c in pending:
        k = json.dumps(c.data_key, sort_keys=True)
        if runs and k == key:
            runs[-1].append(c)
        else:
            runs.append([c])
            key = k
    return runs


def warm_up(exp: Experiment, pending: list[Cell], on_record) -> list[Cell]:
    """Run the first pending cell of every learner in this process, before workers start, and
    return the other cells: a learner's compiled kernels (an empty compilation cache) are then
    compiled once, here, and workers load them from the cache instead of all compiling at the
    same time. A cell's numbers do not depend on the process that runs it."""
    first: dict[str, Cell] = {}
    for c in pending:
        first.setdefault(c.method, c)
    with one_thread():
        for c in first.values():
            on_record(run_cell(exp, c))
    ran = {id(c) for c in first.values()}
    return [c for c in pending if id(c) not in ran]


def run_alone(exp: Experiment, pending: list[Cell], ids: frozenset[str], on_record) -> list[Cell]:
    """Run the pending cells whose id is in ``ids`` one after another in this process and
    return the others."""
    alone = [c for c in pending if c.id in ids]
    with one_thread():
        for rec in run_cells(exp, alone):
            on_record(rec)
    return [c for c in pending if c.id not in ids]


def loky_options(parent: int) -> dict:
    """joblib's options for the loky workers of a run started by process ``parent``: the
    threads of a cell (``--threads``, capped to the CPUs: :func:`~ilnrun.threads.threads_per_cell`;
    one by default, BLAS is pinned to one in a cell anyway) as the workers' thread limit (joblib
    exports it as ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``... in each worker), and the parent
    watchdog from the worker's start (before it runs a cell), as well as at its first cell."""
    return {
        "inner_max_num_threads": threads_per_cell(),
        "initializer": _watch_parent,
        "initargs": (parent,),
    }


def execute_local(
    exp: Experiment,
    pending: list[Cell],
    jobs: int,
    backend: str,
    on_record,
    one_at_a_time: frozenset[str] = frozenset(),
) -> None:
    """Run ``pending`` cells (their numpy passes) with joblib and hand each record to
    ``on_record`` as it finishes. Every cell runs with native thread pools pinned to one thread
    (bit-identical numbers for any ``jobs`` and backend). The cells of ``one_at_a_time`` (too
    big for ``jobs`` of them to fit in memory: :class:`ilnrun.cost.Schedule`) run
    one after another in this process before the workers start on the others."""
    from joblib import Parallel, delayed, parallel_config

    if not pending:
        return
    if jobs == 1 and backend == "loky":
        with one_thread():
            for rec in run_cells(exp, pending):
                on_record(rec)
        return
    watch = backend == "loky"
    parent = os.getpid() if watch else None
    if watch:
        pending = warm_up(exp, pending, on_record)
    if one_at_a_time:
        pending = run_alone(exp, pending, one_at_a_time, on_record)
    # the cells run here are done: their dataset instances would hold memory the workers need
    forget_instances()
    tasks = (delayed(worker_cells)(exp, part, parent) for part in chunks(pending, jobs))
    limits = loky_options(parent) if watch else {}
    from ..tempdirs import joblib_temp_folder

    with (
        joblib_temp_folder() as tmp,
        parallel_config(backend=backend, n_jobs=jobs, temp_folder=tmp, **limits),
    ):
        results = Parallel(return_as="generator_unordered")(tasks)
        try:
            for recs in results:
                for rec in recs:
                    on_record(rec)
        finally:
            # a run that ends early (a stop, a full disk) cancels the cells in flight: joblib's
            # warning that it did says nothing the run's own message does not, and points into
            # joblib
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", CANCELLED_WARNING, UserWarning)
                results.close()
