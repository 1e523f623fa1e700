"""A literal transcription of the ILN paper's Algorithms 1 and 2 — the benchmark's reference.

Nothing is cached between rounds: every round recomputes ``|alpha|_1`` and the sampling
distribution ``q(i) = |alpha_i| / |alpha|_1`` over the stored examples and draws the ``m`` indices
with ``Generator.choice(p=q)`` (an O(t) pass to build the distribution's CDF, then a search per
draw); a shrink divides every stored coefficient by 4 (another O(t) pass). The gradient step has
the corrected (descent) sign, as in :mod:`ilnrun.learners.shrinking_gradient`.

``Generator.choice(t, size=m, p=q)`` draws its ``m`` uniforms with ``Generator.random(m)`` and
searches them in the normalized CDF, and ``w`` is drawn next with ``fmap.sample`` — the same calls,
in the same order, as the learner. With the same seed both therefore draw the same ``(i, w)`` pairs
(up to the rounding of the CDF at a bin edge), so their online predictions agree to rounding; with
different seeds they are two samples of the same random algorithm.
"""

from __future__ import annotations

import numpy as np

from ilnrun.features import FeatureMap
from ilnrun.schedules import step_sizes


def literal_fit(
    X: np.ndarray,
    y: np.ndarray,
    fmap: FeatureMap,
    rng: np.random.Generator,
    *,
    eta: float,
    m: int,
    B: float = 1.0,
    schedule: str = "constant",
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 with Algorithm 2 written out; returns ``(alpha, E)``: the final coefficients
    and the online predictions ``E_t``."""
    T = len(y)
    etas = step_sizes(schedule, eta, T)
    alpha = np.zeros(T)
    E_all = np.zeros(T)
    for t in range(T):
        # Algorithm 2: EST_SCALAR_PROD(alpha, x_{1:t-1}, x_t, m)
        a = alpha[:t]
        l1 = float(np.abs(a).sum())
        if l1 == 0.0:
            E = 0.0
        else:
            q = np.abs(a) / l1
            i = rng.choice(t, size=m, p=q)
            w = fmap.sample(rng, m)
            E = l1 / m * float(np.sum(np.sign(a[i]) * fmap.pairs(X, i, w) * fmap.point(X[t], w)))
        E_all[t] = E
        # Algorithm 1: gradient step or shrink
        if abs(E) < 16.0 * B:
            alpha[t] = etas[t] * (y[t] - E)
        else:
            alpha[:t] /= 4.0
    return alpha, E_all
