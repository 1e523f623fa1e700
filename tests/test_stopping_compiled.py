"""A stop that lands while Python calls a compiled kernel taking a ``np.random.Generator``.

numba unboxes the generator by calling the Python function ``ctypes.cast`` and does not check its
result, so a :class:`~ilnrun.stopping.Stop` raised by the signal handler inside it crashed the
process (status -11: about 1 of 50 ``ilnrun run`` stopped by SIGINT during a pass). Here the
signal is made to land exactly there (``ctypes.cast`` replaced by one that raises SIGINT first),
for every such call from Python: each must run to its end and the stop be raised after it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ilnrun.learners import shrinking_gradient_kernels as sgk

PROBE = textwrap.dedent(
    """
    import ctypes, signal, sys
    from pathlib import Path
    import numpy as np
    from ilnrun import stopping
    from ilnrun.features import Coordinate, ReLU
    from ilnrun.learners import doubly_sgd, shrinking_gradient

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 5)), rng.standard_normal(60)
    sgd = dict(eta=0.1, m=20)
    relu = shrinking_gradient.fit_compiled(X, y, ReLU(5), np.random.default_rng(1), **sgd)
    # (a coordinate pass on numpy's PCG64 makes its draws itself and hands numba no generator:
    # on another bit generator numba unboxes it; the coordinate estimates take PCG64 only and
    # hand numba none either)
    mt = lambda: np.random.Generator(np.random.MT19937(1))
    calls = {
        "shrinking_gradient pass": lambda: shrinking_gradient.fit_compiled(
            X, y, Coordinate(5), mt(), **sgd),
        "doubly_sgd pass": lambda: doubly_sgd.fit_compiled(
            X, y, ReLU(5), np.random.default_rng(1), eta=0.1, k=2),
        "Algorithm 2, compiled chunks": lambda: relu.predictor.estimate_compiled(
            X, X[:7], ReLU(5), 30, np.random.default_rng(2)),
    }
    for call in calls.values():
        call()  # compiled (or loaded) before the signal is made to land
    real = ctypes.cast
    for name, call in calls.items():
        fired = []

        def cast(obj, typ):
            if not fired:
                fired.append(name)
                signal.raise_signal(signal.SIGINT)  # the handler runs here, in numba's unboxing
            return real(obj, typ)

        with stopping.stop_on_signals(Path("."), raising=True):
            ctypes.cast = cast
            try:
                call()
                print(name, "not stopped", fired, flush=True)
            except stopping.Stop:
                print(name, "stopped after the call", bool(fired), flush=True)
            finally:
                ctypes.cast = real
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.skipif(not sgk.available(), reason="numba is not available")
def test_a_stop_landing_in_numbas_unboxing_of_rng_waits_for_the_call_to_end(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    assert len(lines) == 3, proc.stdout
    for line in lines:
        assert line.endswith("stopped after the call True"), line
