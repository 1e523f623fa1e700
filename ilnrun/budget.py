"""Feature budgets: derive ``k`` (Doubly SGD), ``r`` (Fixed-Random) and ``m`` (Shrinking
Gradient) from one budget so that every learner calculates the same number of features
(ILN paper Section 6, "the same overall number of features is calculated"; DESIGN §3).

Unit: one evaluation of ``psi(x; w)`` for one ``(x, w)`` pair during training.

- ``evaluations`` (default) equalizes ``train_evals``:
  Doubly SGD spends ``k T (T+1) / 2`` (round t evaluates the ``k (t-1)`` earlier features and its
  ``k`` new ones on ``x_t``); Fixed-Random ``r T``; Shrinking Gradient ``2 m`` per round after the
  first (one ``psi`` on the stored ``x_i``, one on ``x_t``; ``alpha = 0`` at round 1).
  Hence ``m = k T (T+1) / (4 (T-1))`` rounded to the nearest integer, and ``r = k (T+1) / 2``,
  exact for even ``k`` or odd ``T``; otherwise a half-integer, rounded towards Shrinking
  Gradient's count (k = 1, T = 200 gives m = 51, r = 101: 20 298, 20 200 and 20 100 evaluations,
  all within 1% of each other).
- ``samples`` equalizes ``features_sampled``: Doubly SGD ``k T``, Fixed-Random ``r``, Shrinking
  Gradient ``m (T-1)``. Hence ``r = k T`` and ``m = k T / (T-1)``, rounded.

The learners count their own evaluations; ``tests/test_budget.py`` checks the counters against
these targets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

MATCHES = ("evaluations", "samples")


@dataclass(frozen=True)
class Budget:
    """Per-learner sizes derived from one budget."""

    match: str
    k: int  # Doubly SGD features per round
    r: int  # Fixed-Random features
    m: int  # Shrinking Gradient samples per round
    target: int  # the matched quantity (train_evals or features_sampled) of Doubly SGD

    def as_dict(self) -> dict:
        return asdict(self)


def derive(match: str, dsgd_k: int, T: int) -> Budget:
    """Derive ``(k, r, m)`` and the budget target from Doubly SGD's ``k`` and ``T``."""
    if T < 2:
        raise ValueError(f"T must be >= 2 to match budgets, got {T}")
    k = int(dsgd_k)
    if match == "evaluations":
        target = k * T * (T + 1) // 2
        m = round(k * T * (T + 1) / (4 * (T - 1)))
        # r = k (T + 1) / 2; when that is a half-integer (k odd, T even) the tie is broken
        # towards Shrinking Gradient's 2 m (T - 1), so all three agree as closely as possible
        lo = (k * (T + 1)) // 2
        ties = (lo, lo + 1) if k * (T + 1) % 2 else (lo,)
        r = min(ties, key=lambda c: abs(c * T - 2 * m * (T - 1)))
    elif match == "samples":
        target = k * T
        r = k * T
        m = round(k * T / (T - 1))
    else:
        raise ValueError(f"unknown budget convention {match!r}; expected one of {MATCHES}")
    return Budget(match=match, k=k, r=int(r), m=int(m), target=int(target))


def expected_counts(method: str, budget: Budget, T: int) -> dict[str, int]:
    """The DESIGN §3 formulas for a learner's counters under ``budget`` (for checks and tests)."""
    if method == "doubly_sgd":
        return {"train_evals": budget.k * T * (T + 1) // 2, "features_sampled": budget.k * T}
    if method == "fixed_random":
        return {"train_evals": budget.r * T, "features_sampled": budget.r}
    if method == "shrinking_gradient":
        return {"train_evals": 2 * budget.m * (T - 1), "features_sampled": budget.m * (T - 1)}
    raise ValueError(f"{method!r} has no feature budget")
