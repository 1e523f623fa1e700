"""One whole Shrinking Gradient cell with 1 and with N threads (``ilnrun run --threads N``):
wall and CPU seconds, and whether the numbers are identical.

    python bench/threads.py [--T 100000] [--m 50000] [--threads 1 2]

Coordinate features on clipped-Gaussian-like inputs (D = 800, 640 MB at T = 100 000), step size
0.3 (inv_sqrt), BLAS on one thread as in every cell. The compiled kernels are compiled (or
loaded from the cache) on a short pass first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ilnrun.features import Coordinate  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402

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
    with threadpool_limits(1, user_api="blas"):
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
