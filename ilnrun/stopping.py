"""How a run stops on SIGINT and SIGTERM (README, "Signals"): promptly, never silently ignored.

One guard (:func:`stop_on_signals`) covers a whole ``ilnrun run`` command: the command installs it
first, before any heavy import (numpy, numba, jax: seconds), and the run inside it only checks
it; an API run installs its own where none is active (in the main thread). While it is active:

- the first signal is remembered (:func:`stop_requested`). While the numpy engine's cells run
  and the tables are written (plain Python, numpy, joblib) it is also raised in the main
  thread as :class:`Stop` (a ``KeyboardInterrupt``), so the run unwinds at once: workers
  stopped, the results directory's lock released, the resume hint printed (exit status 128 +
  the signal). Elsewhere (while modules are imported, the jax engine's batches) it is only
  remembered and raised at the next :func:`check_stop`: an exception raised inside ``import
  jax`` crossed a C++ frame of jaxlib's MLIR bindings (nanobind) and aborted the process
  (status 134, a traceback: 1 of 40 SIGTERM trials);
- a remembered stop is never forgotten while the guard is active: where a raised one lands in
  code that swallows it (a ``__del__`` or garbage-collection callback, where Python prints
  "Exception ignored" and goes on), the run raises it again at its next :func:`check_stop`:
  after jax is imported, before the cells, after each finished cell, after the cells and after
  the tables; the one from a callback is dropped without its traceback
  (``sys.unraisablehook``). Before this, a stop swallowed by jax's garbage-collection callback
  while jax was imported was forgotten when the cells started: the run finished every cell and
  exited 0;
- later signals are absorbed: a second Ctrl-C does not cut the cleanup short;
- :data:`GRACE_S` seconds after the first signal a watchdog thread ends the process (status 128
  + the signal) whatever the main thread is doing: compiled code that runs no Python signal
  handler (a long jax batch), a finalization that waits for other threads. The signal's number
  reaches the watchdog through ``signal.set_wakeup_fd``, written by the C-level handler the
  moment the signal arrives. Finished cells are on disk (one ``write`` each), so ending there
  loses only the cells in flight, as a kill would.

A signal before the guard is installed (the first ~0.1 s of the command, while Python and click
start) has its default action: SIGTERM ends the process (status 143 in a shell), SIGINT raises
``KeyboardInterrupt`` there; nothing has been written by then.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GRACE_S = 5.0  # seconds a stopped run may take to unwind before the process ends anyway
SIGNALS = (signal.SIGINT, signal.SIGTERM)
_STOP: dict[str, int | None] = {"signum": None}


class Stop(KeyboardInterrupt):
    """Raised in the main thread by the SIGINT / SIGTERM handler of a run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def stop_handler(signum: int, frame: object) -> None:
    """SIGINT / SIGTERM: the first one is remembered and, where the guard in force raises
    (:func:`stop_on_signals`) and no :func:`deferred` block runs, raises :class:`Stop`; later
    ones are ignored while the stop is under way (a second Ctrl-C does not cut the cleanup)."""
    if _STOP["signum"] is not None:
        return
    _STOP["signum"] = signum
    guard = active()
    if (guard is None or guard.raising) and not _DEFERRED[0]:
        raise Stop(signum)


_DEFERRED = [0]  # deferred() blocks running


@contextmanager
def deferred() -> Iterator[None]:
    """A block that a signal does not cut: a stop asked for inside it is only remembered, and
    raised when the outermost such block ends (where the guard in force raises). numba's
    compilation and cache loading run in one: an exception raised there, between two calls
    into LLVM, left its JIT half built, and a later call of the same kernel crashed the
    process (a segmentation fault, status -11, in about 1 of 50 runs stopped by SIGINT while a
    kernel was loaded from the cache).

    Every call from Python of a compiled kernel that takes a ``np.random.Generator`` runs in one
    too (:func:`~ilnrun.learners.base.compiled_rounds` and the Algorithm-2 estimates): numba
    unboxes the generator by calling the Python function ``ctypes.cast`` and does not check its
    result (numba 0.6x, ``unbox_numpy_random_bitgenerator``), so a :class:`Stop` raised there
    crashed the process (status -11, about 1 of 50 runs stopped by SIGINT during a pass;
    ``tests/test_stopping_compiled.py`` makes the signal land there every time)."""
    _DEFERRED[0] += 1
    try:
        yield
    finally:
        _DEFERRED[0] -= 1
    guard = active()
    if not _DEFERRED[0] and guard is not None and guard.raising:
        check_stop()


def reset_stop() -> None:
    """Forget an earlier stop (a new command or run starts)."""
    _STOP["signum"] = None


def stop_requested() -> int | None:
    """The signal that asked the current run to stop, if any."""
    return _STOP["signum"]


def check_stop() -> None:
    """Raise :class:`Stop` again when a stop was asked for and its exception was swallowed."""
    if _STOP["signum"] is not None:
        raise Stop(_STOP["signum"])


def ignore_signals() -> None:
    """SIGINT and SIGTERM ignored from now on (a stopped command that is exiting)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def leave_signals_to_parent() -> None:
    """In a process forked from a run (a worker, the child that writes ``curves.csv``): the
    run's signal handling is the run's alone. The run's wake-up descriptor is dropped (the
    run's watchdog would read this process's signals as its own), Ctrl-C, which reaches the
    whole process group, is ignored (the run handles it and ends its children), and SIGTERM
    ends the process, its default action."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Watchdog:
    """Ends the process (status 128 + signal) when a stop has not finished within
    :data:`GRACE_S` seconds of the first signal (see the module's docstring). ``out``, the
    results directory once known, is named in its message."""

    def __init__(self, out: Path | None = None) -> None:
        self.out, self.done = out, threading.Event()
        self.r, self.w = socket.socketpair()
        self.w.setblocking(False)
        try:
            self.old_fd = signal.set_wakeup_fd(self.w.fileno(), warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            self.old_fd = None
        self.thread = threading.Thread(target=self._watch, name="ilnrun-stop-watchdog", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while True:
            try:
                data = self.r.recv(64)
            except OSError:
                return
            if not data or self.done.is_set():
                return
            sigs = [b for b in data if b in SIGNALS]
            if sigs and not self.done.wait(GRACE_S):
                name = signal.Signals(sigs[0]).name
                where = f" in {self.out}" if self.out is not None else ""
                sys.stderr.write(
                    f"interrupted by {name}: the run did not stop within {GRACE_S:g} s and was "
                    f"ended; finished cells are saved{where}; run the same command again to "
                    "resume\n"
                )
                sys.stderr.flush()
                os._exit(128 + sigs[0])

    def close(self) -> None:
        self.done.set()
        if self.old_fd is not None:
            signal.set_wakeup_fd(self.old_fd)
        self.w.close()
        self.thread.join(timeout=1.0)
        self.r.close()


class Guard:
    """The signal handling of one command or run (:func:`install`); ``raising``: whether a
    signal raises :class:`Stop` where it lands, or is only remembered (:func:`check_stop`)."""

    def __init__(self, out: Path | None, raising: bool) -> None:
        self.raising = raising
        reset_stop()
        self.old = {sig: signal.signal(sig, stop_handler) for sig in SIGNALS}
        self.old_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        self.watchdog = Watchdog(out)

    def _unraisable(self, unraisable) -> None:
        """A :class:`Stop` that landed in a callback is kept (:func:`check_stop`), not printed;
        once a stop is under way, neither are the errors of objects it left half made (their
        ``__del__``, as llvmlite's when numba's compilation was cut)."""
        if isinstance(unraisable.exc_value, Stop) or stop_requested() is not None:
            return
        self.old_hook(unraisable)

    def close(self, restore: bool = True) -> None:
        """Stop guarding; ``restore``: put back the handlers found (else leave them as they
        are: a stopped command that is exiting ignores further signals)."""
        _ACTIVE.remove(self)
        self.watchdog.close()
        if sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self.old_hook
        if restore:
            for sig, h in self.old.items():
                signal.signal(sig, h)


_ACTIVE: list[Guard] = []


def install(out: Path | None = None, raising: bool = False) -> Guard | None:
    """Install the guard (from the main thread; None elsewhere, where signals cannot be
    handled). An earlier stop is forgotten: a new command or run starts."""
    if threading.current_thread() is not threading.main_thread():
        return None
    guard = Guard(out, raising)
    _ACTIVE.append(guard)
    return guard


def active() -> Guard | None:
    """The guard in force, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def stop_on_signals(out: Path, raising: bool = True) -> Iterator[None]:
    """Guard a run writing into ``out`` (its cells and tables), a signal raising :class:`Stop`
    where it lands when ``raising`` (else only remembered, for :func:`check_stop`): inside a
    command's guard, name ``out`` in the watchdog's message, raise a stop asked for earlier
    and switch the guard to ``raising`` for the block; else install a guard for the run and
    remove it afterwards."""
    guard = active()
    if guard is not None:
        guard.watchdog.out = out
        before, guard.raising = guard.raising, raising
        try:
            check_stop()
            yield
        finally:
            guard.raising = before
        return
    guard = install(out, raising)
    try:
        check_stop()
        yield
    finally:
        if guard is not None:
            guard.close()
