"""One whole Shrinking Gradient cell with 1 and with N threads (``ilnrun run --threads N``):
wall and CPU seconds, and whether the numbers are identical.

    python bench/threads.py [--T 100000] [--m 50000] [--threads 1 2]

Coordinate features on clipped-Gaussian-like inputs (D = 800, 640 MB at T = 100 000), step size
0.3 (inv_sqrt), the native thread pools on one thread as in every cell
(``numeric_env.one_thread``; the pass's threads are its own). The compiled kernels are compiled
(or loaded from the cache) on a short pass first.

Measured on 2 cores with nothing else running: 57.2 and 56.6 s on one thread, 34.3 and 34.2 s
on two (x1.66), the same numbers (2026-11-27, AMD Zen 5). Under a BLAS left at two threads (a
pin entered before scipy's BLAS was loaded), one pass's dot products spun a second core and two
threads ran slower than one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ilnrun.features import Coordinate  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402
from ilnrun.numeric_env import one_thread  # noqa: E402

D = 800


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--T", type=int, default=100_000)
    ap.add_argument("--m", type=int, default=50_000)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = np.clip(rng.standard_normal((args.T, D)) / 2.0, -1.0, 1.0)
    y = np.tanh(X[:, :10].sum(axis=1) / 3.0)
    fmap, kw = Coordinate(D), dict(eta=0.3, m=args.m, schedule="inv_sqrt")
    results = {}
    with one_thread():  # as a cell runs: every BLAS (scipy's, which np.dot calls, too) on one
        for n in args.threads:  # compile (or load) each variant on a short pass
            sg.fit_compiled(X[:300], y[:300], fmap, np.random.default_rng(1), threads=n, **kw)
        for n in args.threads:
            w0, c0 = time.perf_counter(), time.process_time()
            results[n] = sg.fit_compiled(X, y, fmap, np.random.default_rng(1), threads=n, **kw)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            print(f"T={args.T:,} m={args.m:,} threads {n}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    first = results[args.threads[0]]
    same = all(
        np.array_equal(first.losses, r.losses)
        and np.array_equal(first.predictor.alpha, r.predictor.alpha)
        for r in results.values()
    )
    print(f"identical numbers: {same}")


if __name__ == "__main__":
    main()
