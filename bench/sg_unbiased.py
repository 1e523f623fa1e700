"""The unbiased gradient of Shrinking Gradient with a non-square loss (docs/algorithms.md §1.10):
its mean against the exact ``l'(<f, phi(x)>, y)``, its variance against ``m`` and ``p``, and what it
costs (``python bench/sg_unbiased.py [--draws 20000]``).

A fixed ``f`` of four terms and a point ``x`` (coordinate features on ``D = 4``, whose kernel
``x . x' / D`` gives ``<f, phi(x)>`` exactly), scaled so that ``<f, phi(x)>`` is 4.6 (beyond the
logistic series' radius ``π`` at 0) for the logistic loss and 1.2 (beside the kink ``y p = 1``)
for the smoothed hinge. Each draw is one step's estimate as :func:`ilnrun.learners.
shrinking_gradient.fit_numpy` makes it: a pilot Algorithm-2 estimate ``X_0`` of ``m`` samples, then
:func:`ilnrun.learners.taylor.estimate_derivative` around it over further Algorithm-2 estimates
(``KernelExpansion.estimate_numpy``, ``m`` samples each). Printed per setting: the exact value,
the mean of the draws and its z-score, the variance, the mean copies and ψ-evaluations an estimate
costs (``2 m`` per Algorithm-2 estimate, the pilot's included), and variance × evaluations.
Seeded: the same numbers on every run of one numpy build.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ilnrun.features import Coordinate  # noqa: E402
from ilnrun.learners.base import KernelExpansion  # noqa: E402
from ilnrun.learners.taylor import estimate_derivative  # noqa: E402
from ilnrun.losses import LOSSES  # noqa: E402

POINTS = {"logistic": 4.6, "smoothed_hinge": 1.2}  # <f, phi(x)> for each loss


def problem(target: float) -> tuple[KernelExpansion, np.ndarray, np.ndarray, Coordinate, float]:
    """``(f, X_train, x, fmap, <f, phi(x)>)`` with ``<f, phi(x)> = target`` (alpha scaled)."""
    X_train = np.array(
        [[2.0, 1.5, 2.5, 1.0], [1.0, 2.0, 0.5, 2.5], [2.5, -0.5, 1.5, 2.0], [-1.0, 1.0, 2.0, 0.5]]
    )
    x = np.array([[2.0, 2.0, 2.0, 2.0]])
    fmap = Coordinate(4)
    alpha = np.array([0.4, 0.3, 0.25, -0.1])
    exact = float(alpha @ fmap.kernel(X_train, x)[:, 0])
    alpha = alpha * target / exact
    return KernelExpansion(alpha), X_train, x, fmap, float(alpha @ fmap.kernel(X_train, x)[:, 0])


def draws(
    loss: str, y: float, m: int, n: int, seed: int, *, p: float = 2.0, zeroth: str = "exact"
) -> tuple[np.ndarray, np.ndarray, float]:
    """``n`` estimates of ``l'(<f, phi(x)>, y)`` at ``m`` samples an Algorithm-2 estimate, the
    copies each drew, and the exact value."""
    f, X_train, x, fmap, mu = problem(POINTS[loss])
    spec = LOSSES[loss]
    rng = np.random.default_rng(seed)

    def copy() -> float:
        return float(f.estimate_numpy(X_train, x, fmap, m, rng)[0])

    out, copies = np.empty(n), np.empty(n, dtype=np.int64)
    for j in range(n):
        pilot = copy()
        out[j], copies[j] = estimate_derivative(
            lambda x0, k: spec.derivative_series(x0, y, k), pilot, copy, rng, p=p, zeroth=zeroth
        )
    return out, copies, float(spec.derivative(mu, y))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20000)
    a = ap.parse_args()
    print("loss            y   zeroth    p    m     exact      mean      z    variance  copies"
          "  evals  var*evals")  # fmt: skip
    settings = [(m, 2.0) for m in (10, 30, 100, 300, 1000)] + [(100, p) for p in (1.5, 3.0, 5.0)]
    for loss in POINTS:
        for y in (1.0, -1.0):
            for zeroth in ("sampled", "exact"):
                for m, p in settings:
                    g, c, exact = draws(loss, y, m, a.draws, 2026, p=p, zeroth=zeroth)
                    z = (g.mean() - exact) / (g.std(ddof=1) / np.sqrt(len(g)))
                    evals = 2 * m * (1 + c.mean())
                    print(
                        f"{loss:14s} {y:+.0f} {zeroth:8s} {p:4.1f} {m:5d} {exact:+.6f} "
                        f"{g.mean():+.6f} {z:+5.2f} {g.var(ddof=1):10.3e} {c.mean():6.3f} "
                        f"{evals:6.0f} {g.var(ddof=1) * evals:9.3g}"
                    )


if __name__ == "__main__":
    main()
