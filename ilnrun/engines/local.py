"""The local engine: cells run one at a time with their numpy passes, in this process or in
worker processes (docs/architecture.md §3).

- Execution (``--backend``, :func:`resolve_backend`): ``fork`` workers are forked from the run's
  process (:func:`execute_forked`: they start at once with every module and compiled kernel the
  parent has loaded; Linux, one thread per cell), ``loky`` workers are fresh processes through
  joblib, ``dask`` goes through joblib's dask backend; ``auto``, the default, is ``fork`` where
  it applies and ``loky`` elsewhere. Each worker caches the last few dataset instances
  (:func:`ilnrun.cell.instance`), and cells sharing an instance are dispatched consecutively.
  Nothing depends on the number of workers, the backend or the order in which cells run
  (seeds: :func:`ilnrun.cell.seeds`).
- Threads: BLAS and every other native thread pool run one thread inside a cell
  (:func:`ilnrun.numeric_env.one_thread`), whether the cell runs in-process (``--jobs 1``) or in
  a worker, so the numbers are bit-identical for any ``--jobs`` and backend. Fork and loky
  workers exit when the parent process dies.
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

import gc
import json
import math
import multiprocessing
import os
import sys
import threading
import time
import warnings

from ..cell import forget_instances, run_cell, run_cells, twins
from ..config import Cell, Experiment
from ..numeric_env import one_thread
from ..stopping import leave_signals_to_parent
from ..threads import forking, resolve_backend, threads_per_cell

__all__ = [
    "CHUNK_ROUNDS",
    "INSTANCE_ROUNDS",
    "Progress",
    "WorkerLost",
    "chunks",
    "execute_forked",
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


class WorkerLost(RuntimeError):
    """A worker process ended while it held cells (killed; out of memory): the run stops, the
    records already returned are kept and the others run again on resume."""


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
    """Run ``pending`` cells (their numpy passes) in ``jobs`` workers of ``backend``
    (:func:`resolve_backend`) and hand each record to ``on_record`` as it finishes. Every cell
    runs with native thread pools pinned to one thread (bit-identical numbers for any ``jobs``
    and backend). The cells of ``one_at_a_time`` (too big for ``jobs`` of them to fit in
    memory: :class:`ilnrun.cost.Schedule`) run one after another in this process before the
    workers start on the others."""
    if not pending:
        return
    backend = resolve_backend(backend)
    if jobs == 1 and backend in ("fork", "loky"):
        with one_thread():
            for rec in run_cells(exp, pending):
                on_record(rec)
        return
    watch = backend in ("fork", "loky")
    parent = os.getpid() if watch else None
    if watch:
        pending = warm_up(exp, pending, on_record)
    if one_at_a_time:
        pending = run_alone(exp, pending, one_at_a_time, on_record)
    # the cells run here are done: their dataset instances would hold memory the workers need
    forget_instances()
    if backend == "fork":
        execute_forked(exp, chunks(pending, jobs), jobs, on_record)
        return
    from joblib import Parallel, delayed, parallel_config  # (here: forked workers need none)

    tasks = (delayed(worker_cells)(exp, part, parent) for part in chunks(pending, jobs))
    limits = loky_options(parent) if watch else {}
    from ..tempdirs import joblib_temp_folder

    with (
        joblib_temp_folder() as tmp,
        parallel_config(backend=backend, n_jobs=jobs, temp_folder=tmp, **limits),
    ):
        from joblib.externals.loky.process_executor import TerminatedWorkerError

        results = Parallel(return_as="generator_unordered")(tasks)
        try:
            for recs in results:
                for rec in recs:
                    on_record(rec)
        except TerminatedWorkerError as exc:
            raise WorkerLost(_lost(exc)) from None
        finally:
            # a run that ends early (a stop, a full disk) cancels the cells in flight: joblib's
            # warning that it did says nothing the run's own message does not, and points into
            # joblib
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", CANCELLED_WARNING, UserWarning)
                results.close()


# what the forked workers find in memory: the run's experiment and its tasks, set by the parent
# just before it forks them (nothing of either is pickled; a task is its index)
_FORKED: tuple[Experiment, list[list[Cell]]] | None = None


def _forked_start(parent: int) -> None:
    """A forked worker's start: the run's signal handling is the parent's alone — its wake-up
    descriptor (the parent's watchdog would read this worker's signals as its own) is dropped,
    Ctrl-C (sent to the whole process group) is left to the parent, which ends the workers, and
    SIGTERM ends the worker as it ends a loky worker; then the parent watchdog
    (:func:`_watch_parent`)."""
    leave_signals_to_parent()
    _watch_parent(parent)


def _forked_task(index: int) -> list[dict]:
    """Task ``index`` of the run's tasks, in a forked worker (:func:`worker_cells`)."""
    assert _FORKED is not None
    exp, parts = _FORKED
    return worker_cells(exp, parts[index])


def execute_forked(exp: Experiment, parts: list[list[Cell]], jobs: int, on_record) -> None:
    """Run the tasks ``parts`` in ``jobs`` worker processes forked from this one (``--backend
    fork``) and hand each record to ``on_record`` as its task returns.

    A forked worker starts with everything this process has loaded — the modules, the compiled
    kernels (:func:`warm_up` loaded or compiled them here), the experiment — so it neither imports
    nor loads a kernel, and a task is sent as its index. The numbers are those of any other
    backend (every cell's randomness comes from its own seed; one thread in a cell). A stop or an
    error here ends the workers at once (the tasks not returned are run again on resume); a worker
    that dies (killed, out of memory) ends the run with an error, the returned records kept."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    global _FORKED
    _FORKED = (exp, parts)
    # what this process holds now (modules, kernels, the experiment) out of the cyclic garbage
    # collector's view until the workers are done: its full collections, here as the records
    # come in and in the workers, then walk only what was made since (as Python's gc docs
    # advise before a fork)
    gc.freeze()
    pool = ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_forked_start,
        initargs=(os.getpid(),),
    )
    try:
        with forking():  # (the workers are all forked on the first submit, from this thread)
            futures = [pool.submit(_forked_task, i) for i in range(len(parts))]
        for fut in as_completed(futures):  # (in the order they finish)
            try:
                recs = fut.result()
            except BrokenProcessPool as exc:
                raise WorkerLost(_lost(exc)) from None
            for rec in recs:
                on_record(rec)
    except BaseException:
        _end_pool(pool)
        raise
    finally:
        _FORKED = None
        gc.unfreeze()
    pool.shutdown(wait=True)


def _end_pool(pool) -> None:
    """Shut ``pool`` down without waiting for the tasks in flight: the queued ones are
    cancelled and the workers killed (``kill_workers`` from Python 3.14; before, the pool's own
    list of its processes)."""
    kill = getattr(pool, "kill_workers", None)
    if kill is not None:
        pool.shutdown(wait=False, cancel_futures=True)
        kill()
    else:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            if p.is_alive():
                p.kill()
    pool.shutdown(wait=True)


def _lost(exc: BaseException) -> str:
    """What :class:`WorkerLost` says of the pool's error ``exc`` (the signal that ended a
    worker where the pool names it)."""
    text = str(exc)
    sig = next((f" ({n})" for n in ("SIGKILL", "SIGSEGV", "SIGBUS", "SIGABRT") if n in text), "")
    return f"a worker process ended while running cells{sig}: killed, or out of memory?"
