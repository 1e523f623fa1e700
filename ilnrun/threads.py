"""Threads of one cell: the resource knob ``ilnrun run --threads N`` (environment variable
``ILNRUN_THREADS``).

A learner whose pass can split a round's work over threads with the same numbers for any count
(Shrinking Gradient's compiled pass: draws in the stream's order, then search, gather and sum
in fixed-size chunks added in chunk order; docs/algorithms.md §1.9) reads
:func:`threads_per_cell`. It changes no number, so it is not a config key (like ``--jobs``).
Default: one thread per cell.
"""

from __future__ import annotations

import os
import sys

THREADS_ENV = "ILNRUN_THREADS"
_NOTED: set[str] = set()


def threads_per_cell() -> int:
    """``ILNRUN_THREADS`` (a whole number >= 1), default 1; a bad value is reported once on
    stderr and ignored."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return 1
    try:
        n = int(raw)
        if n < 1:
            raise ValueError
    except ValueError:
        msg = f"{THREADS_ENV}={raw!r} is not a whole number >= 1: one thread per cell"
        if msg not in _NOTED:
            _NOTED.add(msg)
            print(f"note: {msg}", file=sys.stderr)
        return 1
    return n


def set_threads_per_cell(threads: int) -> None:
    """Set the knob for this process and the workers it starts afterwards."""
    os.environ[THREADS_ENV] = str(int(threads))
