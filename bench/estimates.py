"""Coordinate Algorithm-2 test estimates, compiled against numpy
(``python bench/estimates.py [--repeat 7] [--calls 20]``).

In one process, interleaved, ``--repeat`` times (ratios as min / median / max; CPU time of this
process), at figure1's setting (T = 200 stored examples of Shrinking Gradient's averaged
predictor, D = 800, ``m_test`` = 1 000, 200 eval points):

1. the multinomial counts of one call: ``rng.multinomial(1000, q, size=200)`` against the compiled
   ``estimate_kernels.multinomial`` (the same counts);
2. one whole estimate call: ``KernelExpansion.estimate_numpy`` against ``estimate_coordinate``
   (and ``estimate_compiled``, the compiled products with numpy's multinomial, for reference).

Every compiled result is checked equal to numpy's before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ilnrun.features import Coordinate  # noqa: E402
from ilnrun.learners import estimate_kernels  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402

D, T, M_TEST, POINTS = 800, 200, 1000, 200


def setting():
    """figure1-like inputs and Shrinking Gradient's averaged predictor after T = 200 rounds."""
    rng = np.random.default_rng(3)
    X = np.clip(rng.standard_normal((T + POINTS, D)) / 2.0, -1.0, 1.0)
    y = np.tanh(X[:, :10].sum(axis=1) / 3.0)
    res = sg.fit_numpy(X[:T], y[:T], Coordinate(D), np.random.default_rng(1), eta=0.3, m=101)
    return X[:T], X[T:], res.averaged


def spread(a) -> str:
    a = np.asarray(a)
    return f"{a.min():.2f} / {np.median(a):.2f} / {a.max():.2f}"


def per_call(f, calls: int) -> float:
    """CPU seconds per call of ``f`` (mean over ``calls`` calls)."""
    t = time.process_time()
    for _ in range(calls):
        f()
    return (time.process_time() - t) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    X, X_eval, pred = setting()
    fmap = Coordinate(D)
    total, q, _ = pred._sampling()
    print(
        f"load: {os.getloadavg()[0]:.2f} (1-min average); stored examples with alpha != 0: "
        f"{np.count_nonzero(pred.alpha)} of {len(pred.alpha)}"
    )

    # equal numbers first (and the compilation out of the timings)
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    assert np.array_equal(
        a.multinomial(M_TEST, q, size=POINTS), estimate_kernels.multinomial(b, M_TEST, q, POINTS)
    )
    ests = {}
    for name in ("numpy", "coordinate", "compiled"):
        ests[name] = getattr(pred, f"estimate_{name}")(
            X, X_eval, fmap, M_TEST, np.random.default_rng(2)
        )
    assert np.array_equal(ests["numpy"], ests["coordinate"])
    assert np.array_equal(ests["numpy"], ests["compiled"])

    rng = np.random.default_rng(4)
    mult = {"numpy": [], "compiled": []}
    est = {"numpy": [], "coordinate": [], "compiled": []}
    for _ in range(args.repeat):
        mult["numpy"].append(per_call(lambda: rng.multinomial(M_TEST, q, size=POINTS), args.calls))
        mult["compiled"].append(
            per_call(lambda: estimate_kernels.multinomial(rng, M_TEST, q, POINTS), args.calls)
        )
        for name in est:
            f = getattr(pred, f"estimate_{name}")
            est[name].append(per_call(lambda f=f: f(X, X_eval, fmap, M_TEST, rng), args.calls))
    ms = {k: 1e3 * np.array(v) for k, v in {**mult}.items()}
    print(
        f"multinomial({M_TEST}, q over {T}, size={POINTS}) ms/call (min / median / max): "
        f"numpy {spread(ms['numpy'])}, compiled {spread(ms['compiled'])}; "
        f"speed-up x{spread(ms['numpy'] / ms['compiled'])}"
    )
    es = {k: 1e3 * np.array(v) for k, v in est.items()}
    print(
        f"estimate call (T={T}, D={D}, m={M_TEST}, {POINTS} points) ms/call: "
        f"numpy {spread(es['numpy'])}, compiled coordinate {spread(es['coordinate'])}, "
        f"compiled products + numpy multinomial {spread(es['compiled'])}"
    )
    print(
        f"speed-up of estimate_coordinate over estimate_numpy: "
        f"x{spread(es['numpy'] / es['coordinate'])}; over estimate_compiled: "
        f"x{spread(es['compiled'] / es['coordinate'])}"
    )
    print(f"load: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
