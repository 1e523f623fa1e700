"""What a loss is: its value, derivative, label space, yardstick and metrics (docs/protocol.md §12).

A loss ``l(p, y)`` of a prediction ``p`` and a label ``y`` is a plugin like a learner, a feature
map or a dataset: one module of :mod:`ilnrun.losses` declares it as ``SPEC``, a
:class:`LossSpec`. The online learners that support it (``LearnerSpec.losses``) step along
``-eta_t l'(yhat_t, y_t)`` times the round's features (Dai et al., Algorithm 1: ``alpha_t =
-gamma_t l'(f(x_t), y_t)``), and evaluation scores every predictor with it. This module imports
nothing heavy: ``ilnrun validate`` reads the specs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# The label spaces a loss or a dataset declares (``DatasetSpec.labels``): ``real`` labels in
# [-1, 1], or ``pm1`` labels in {-1, +1} (classification).
LABEL_SPACES = ("real", "pm1")

# The metric columns a loss may report besides ``test_loss`` (docs/protocol.md §12):
# ``test_nmse`` (mean (f(x) - y)^2 / var(y_test)) and ``test_error`` (the misclassification rate
# of sign f(x); a prediction of exactly 0 counts as an error).
METRICS = ("test_nmse", "test_error")


@dataclass(frozen=True)
class LossSpec:
    """One loss.

    - ``name``: the config value (``loss: <name>``, ``methods.<learner>.loss``); ``label`` its
      formula for tables and figures; ``summary`` a sentence for ``ilnrun list`` and reports.
    - ``value(p, y)``: ``l(p, y)``, elementwise over arrays (and for Python floats, the per-round
      loss of an online pass); ``derivative(p, y)``: ``dl/dp``, the same way.
    - ``labels``: the label space it needs (``real``: any label; ``pm1``: labels in {-1, +1};
      ``ilnrun validate`` refuses a ``pm1`` loss on a dataset whose labels are ``real``).
    - ``best_constant(y_train)``: the constant ``c`` minimising ``mean l(c, y_train)``, the
      yardstick ``test_loss_const`` of every row (the best constant predictor a learner could
      know from its training labels).
    - ``metrics``: the metric columns it reports besides its loss (:data:`METRICS`).
    - ``mean(p, y)`` (optional): ``mean l(p, y)`` when it must be computed in a fixed order of
      operations (the square loss's ``0.5 * mean((p - y)^2)``, the committed numbers' formula);
      else ``mean(value(p, y))``.
    - ``derivative_series(p, y, n)`` (optional): the Taylor coefficients of ``l'(·, y)`` around
      the float ``p``, ``gamma_k = l^(k+1)(p, y) / k!`` for ``k = 0..n`` (an array of ``n + 1``
      floats; ``gamma_0 = derivative(p, y)``): the derivatives of ``l'`` divided by ``k!``, which
      stay in floating-point range where ``k!`` would not. A loss with an analytic ``l'`` gives
      it to opt in to Shrinking Gradient's unbiased gradient (paper 003 §III-C, the random-length
      Taylor series; docs/algorithms.md §1.10); ``None``: it has none.
    - ``no_series`` (optional): for a loss without ``derivative_series``, why none exists (the
      reason ``ilnrun validate`` gives when Shrinking Gradient is asked to learn with it).
    - ``probability(p)`` (optional): ``P(y = +1)`` for a prediction ``p``, elementwise, for a
      loss that defines one (a negative log-likelihood: the logistic loss's ``σ(p)``); the
      classifiers' ``predict_proba`` exists only for such a loss (docs/estimators.md §6).
    """

    name: str
    label: str
    summary: str
    value: Callable
    derivative: Callable
    labels: str
    best_constant: Callable[[np.ndarray], float]
    metrics: tuple[str, ...] = ()
    mean: Callable[[np.ndarray, np.ndarray], float] | None = None
    derivative_series: Callable[[float, float, int], np.ndarray] | None = None
    no_series: str = ""
    probability: Callable[[np.ndarray], np.ndarray] | None = None

    def risk(self, p: np.ndarray, y: np.ndarray) -> float:
        """``mean l(p, y)`` over the points (:attr:`mean` when the loss gives it)."""
        if self.mean is not None:
            return self.mean(p, y)
        return float(np.mean(self.value(np.asarray(p, dtype=float), np.asarray(y, dtype=float))))


def majority_class(y: np.ndarray) -> float:
    """The majority class of ±1 labels ``y``: ``+1`` when at least half are positive, else
    ``-1`` (``+1`` on a tie, as the hinge loss's best constant). Predicted everywhere, it is the
    classification yardstick ``test_error_const`` of every loss (docs/protocol.md §8, §12): a
    loss's own best constant can be 0 on a tie (the square loss's mean, the logistic log-odds),
    whose sign is no class at all."""
    return 1.0 if np.sum(y > 0) >= np.sum(y < 0) else -1.0


def error_rate(p: np.ndarray, y: np.ndarray) -> float:
    """The misclassification rate of ``sign p`` on ±1 labels ``y``: ``mean(sign(p) != y)`` (a
    prediction of exactly 0 has no sign and counts as an error: the zero predictor's rate is
    1)."""
    return float(np.mean(np.sign(p) != y))
