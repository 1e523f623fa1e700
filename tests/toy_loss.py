"""The worked example of docs/architecture.md §6.1: the exponential loss ``l(p, y) = exp(−y p)``
on ±1 labels (AdaBoost's), one module declaring its ``LossSpec`` as ``SPEC``, written as the docs
tell a contributor (a test's toy: registered by ``tests/toy_plugins.py``, its one registry line,
instead of a name in ``MODULES`` of ``ilnrun/losses/__init__.py``).

``dl/dp = −y exp(−y p)``. Best constant: ``½ log(n₊ / n₋)`` (zero derivative of
``π e^{−c} + (1 − π) e^{c}``: ``e^{2c} = π / (1 − π)``); when one class is absent the minimiser
is infinite and the counts are taken as ``n± + ½`` (as the logistic loss's) so that the
yardstick is finite. Reported with ``test_error``. It gives no ``derivative_series``: Shrinking
Gradient refuses it (``methods.shrinking_gradient.loss``)."""

from __future__ import annotations

import numpy as np

from ilnrun.losses.base import LossSpec


def value(p, y):
    """``exp(−y p)``."""
    return np.exp(-y * p)


def derivative(p, y):
    """``−y exp(−y p)``."""
    return -y * np.exp(-y * p)


def best_constant(y: np.ndarray) -> float:
    """``½ log(n₊ / n₋)`` (``n± + ½`` when a class is absent)."""
    pos, neg = float(np.sum(y > 0)), float(np.sum(y < 0))
    if pos == 0 or neg == 0:
        pos, neg = pos + 0.5, neg + 0.5
    return 0.5 * float(np.log(pos / neg))


SPEC = LossSpec(
    name="toy_exponential",  # the value of `loss:` and `methods.<learner>.loss:`
    label="exp(−yp)",  # tables and figures
    summary="the exponential loss exp(−y p) (classification, ±1 labels; a test's toy loss)",
    value=value,  # elementwise over arrays, and on Python floats (an online pass's round)
    derivative=derivative,
    labels="pm1",  # a pm1 loss is refused on a dataset whose labels are real
    best_constant=best_constant,
    metrics=("test_error",),
)
