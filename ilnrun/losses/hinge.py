"""The hinge loss ``l(p, y) = max(0, 1 − y p)`` on ±1 labels (Dai et al. §7, the SVM's loss).

``dl/dp = −y`` where ``y p < 1``, else 0 (the subgradient 0 is taken at the kink ``y p = 1``).
The best constant: with a fraction ``π`` of ``+1`` labels, ``mean l(c, y) = 1 + c (1 − 2π)`` on
``[−1, 1]`` and larger outside, so the minimiser is the majority sign, ``c = sign(2π − 1)``
(every ``c`` in ``[−1, 1]`` ties at ``π = ½``: ``+1`` is taken). Reported with ``test_error``.
"""

from __future__ import annotations

import numpy as np

from .base import LossSpec


def value(p, y):
    """``max(0, 1 − y p)``."""
    return np.maximum(0.0, 1.0 - y * p)


def derivative(p, y):
    """``−y`` where ``y p < 1``, else 0."""
    return np.where(y * p < 1.0, -y, 0.0) * 1.0


def best_constant(y: np.ndarray) -> float:
    """The majority sign of the training labels (``+1`` on a tie)."""
    return 1.0 if np.sum(y > 0) >= np.sum(y < 0) else -1.0


SPEC = LossSpec(
    name="hinge",
    label="max(0,1−yp)",
    summary="the hinge loss max(0, 1 − y p) (classification, ±1 labels)",
    value=value,
    derivative=derivative,
    labels="pm1",
    best_constant=best_constant,
    metrics=("test_error",),
    no_series="its derivative is discontinuous at y p = 1, and paper 003 (§III-C, after [17]) "
    "shows that no unbiased estimate of a discontinuous function of E[X] exists: use "
    "smoothed_hinge, or the square loss on the ±1 labels",
)
