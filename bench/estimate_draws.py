"""Algorithm-2 estimates: the ``multinomial`` stream against ``inverse_cdf_v1`` and
``inverse_cdf_v2``, and ``inverse_cdf_v2`` against ``inverse_cdf_v1``
(``python bench/estimate_draws.py [--repeat 7] [--calls 10] [--relu]``).

In one process, interleaved, ``--repeat`` times (CPU time of this process; ratios as
min / median / max over the repeats), at figure1's setting (T = 200 stored examples of Shrinking
Gradient's averaged predictor, D = 800, coordinate features): one ``predict_estimated`` call
with each stream, compiled (what a run uses) and numpy (``estimate_numpy``: numba hidden), at
``m`` = 25, 101, 404 (figure1's training m at k = 1, 2, 8) and 1 000 (its ``m_test``), on 200
and 500 eval points. ``--relu``: the same on unit-norm inputs in 80 dimensions with ReLU
features (relu_iln's setting), compiled only. Each compiled result is checked equal to the
numpy one before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from estimates import per_call  # noqa: E402

from ilnrun.features import Coordinate, ReLU  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402
from ilnrun.learners.estimate_draws import DRAWS  # noqa: E402

D, T = 800, 200
MS, POINTS = (25, 101, 404, 1000), (200, 500)


def setting(relu: bool):
    """figure1-like inputs and Shrinking Gradient's averaged predictor after T = 200 rounds
    (``bench/estimates.py``'s; ``relu``: unit-norm rows in 80 dimensions, ReLU features)."""
    rng = np.random.default_rng(3)
    X = np.clip(rng.standard_normal((T + max(POINTS), D)) / 2.0, -1.0, 1.0)
    y = np.tanh(X[:, :10].sum(axis=1) / 3.0)
    fmap = Coordinate(D)
    if relu:
        X = X[:, :80] / np.linalg.norm(X[:, :80], axis=1, keepdims=True)
        fmap = ReLU(80)
    res = sg.fit_numpy(X[:T], y[:T], fmap, np.random.default_rng(1), eta=0.3, m=101)
    return X[:T], X[T:], fmap, res.averaged


def spread(a) -> str:
    a = np.sort(np.asarray(a, dtype=float))
    return f"{a[0]:.3f} / {np.median(a):.3f} / {a[-1]:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--relu", action="store_true")
    args = ap.parse_args()
    X, X_eval, fmap, pred = setting(args.relu)
    print(
        f"load: {os.getloadavg()[0]:.2f} (1-min average); {fmap.name}, stored examples with "
        f"alpha != 0: {np.count_nonzero(pred.alpha)} of {len(pred.alpha)}"
    )
    paths = {"compiled": pred.predict_estimated}
    if not args.relu:
        paths["numpy"] = pred.estimate_numpy
    for draws in DRAWS:  # equal numbers first (and the compilation out of the timings)
        got = [
            f(X, X_eval, fmap, 101, np.random.default_rng(2), draws=draws) for f in paths.values()
        ]
        assert all(np.array_equal(got[0], g) for g in got)
    rng = np.random.default_rng(4)
    for n in POINTS:
        for m in MS:
            cpu = {(p, s): [] for p in paths for s in DRAWS}
            for _ in range(args.repeat):
                for (p, s), v in cpu.items():

                    def call(f=paths[p], s=s, n=n, m=m):
                        return f(X, X_eval[:n], fmap, m, rng, draws=s)

                    v.append(per_call(call, args.calls))
            ms = {k: 1e3 * np.array(v) for k, v in cpu.items()}
            for p in paths:
                calls = ", ".join(f"{s} {spread(ms[(p, s)])}" for s in DRAWS)
                ups = "; ".join(
                    f"{b} over {a} x{spread(ms[(p, a)] / ms[(p, b)])}"
                    for a, b in ((DRAWS[0], DRAWS[1]), (DRAWS[0], DRAWS[2]), (DRAWS[1], DRAWS[2]))
                )
                print(f"{p:8s} n={n} m={m:4d}: ms/call {calls}; {ups}", flush=True)
    print(f"load: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
