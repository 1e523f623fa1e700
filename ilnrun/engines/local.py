"""The local engine: cells run one at a time with their numpy passes, in this process or in
worker processes (docs/architecture.md §3).

- Execution: cells go through joblib (``loky`` processes, or dask through joblib's dask backend);
  each worker caches the last few dataset instances (:func:`ilnrun.cell.instance`), and cells
  sharing an instance are dispatched consecutively. Nothing depends on the number of workers,
  the backend or the order in which cells run (seeds: :func:`ilnrun.cell.seeds`).
- Threads: BLAS and every other native thread pool run one thread inside a cell, whether the cell
  runs in-process (``--jobs 1``) or in a worker, so the numbers are bit-identical for any
  ``--jobs`` and backend. Loky workers exit when the parent process dies.
- Every finished record goes to ``on_record`` in the parent the moment it arrives (which appends
  it to ``cells.jsonl``, :mod:`ilnrun.results`), so an interrupted run resumes where it stopped.
- :class:`Progress`: cells done / total on stderr, for every engine.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

from ..cell import run_cell
from ..config import Cell, Experiment

__all__ = ["Progress", "execute_local", "one_thread", "worker_cell"]


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


_CONTROLLER: tuple[tuple[int, int], object] | None = None


def one_thread():
    """A context in which every native thread pool (BLAS, OpenMP) runs one thread.

    Listing the loaded native libraries costs ~10 ms, so the list is kept and made again only
    when the process has imported new modules since (which is when new libraries can appear):
    entering the context then costs ~0.1 ms per cell."""
    global _CONTROLLER
    state = (os.getpid(), len(sys.modules))
    if _CONTROLLER is None or _CONTROLLER[0] != state:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
        _CONTROLLER = ((os.getpid(), len(sys.modules)), controller)
    return _CONTROLLER[1].limit(limits=1)


def worker_cell(exp: Experiment, cell: Cell, watch_parent: int | None = None) -> dict:
    """:func:`~ilnrun.cell.run_cell` in a worker: native thread pools pinned to one thread (as
    in-process); with ``watch_parent`` (the parent's pid) the worker exits when its parent dies."""
    if watch_parent is not None:
        _watch_parent(watch_parent)
    with one_thread():
        return run_cell(exp, cell)


def execute_local(exp: Experiment, pending: list[Cell], jobs: int, backend: str, on_record) -> None:
    """Run ``pending`` cells (their numpy passes) with joblib and hand each record to
    ``on_record`` as it finishes. Every cell runs with native thread pools pinned to one thread
    (bit-identical numbers for any ``jobs`` and backend)."""
    from joblib import Parallel, delayed, parallel_config

    if not pending:
        return
    if jobs == 1 and backend == "loky":
        with one_thread():
            for c in pending:
                on_record(run_cell(exp, c))
        return
    watch = backend == "loky"
    parent = os.getpid() if watch else None
    tasks = (delayed(worker_cell)(exp, c, parent) for c in pending)
    # loky: one thread per worker, and the parent watchdog from the worker's start (before it
    # runs a cell), as well as at its first cell
    limits = (
        {"inner_max_num_threads": 1, "initializer": _watch_parent, "initargs": (parent,)}
        if watch
        else {}
    )
    from ..tempdirs import joblib_temp_folder

    with (
        joblib_temp_folder() as tmp,
        parallel_config(backend=backend, n_jobs=jobs, temp_folder=tmp, **limits),
    ):
        for rec in Parallel(return_as="generator_unordered")(tasks):
            on_record(rec)
