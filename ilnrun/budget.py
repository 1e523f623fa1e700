"""Feature budgets: one budget, and the size each budgeted learner takes from it so that every
learner calculates the same number of features (ILN paper Section 6, "the same overall number of
features is calculated"; docs/budgets.md).

Unit: one evaluation of ``psi(x; w)`` for one ``(x, w)`` pair during training.

The budget is given in features per round, ``per_round = k`` (the YAML key ``budget.dsgd_k``:
the unit is Doubly SGD's ``k``): a pass of ``T`` rounds in which every round draws ``k`` features
and evaluates all features drawn so far on its input spends ``k T (T+1) / 2`` evaluations and
draws ``k T`` features. That is the **target**,
in the unit of the convention ``match``:

- ``evaluations`` (default) equalizes ``train_evals``: target ``k T (T+1) / 2``;
- ``samples`` equalizes ``features_sampled``: target ``k T``;
- ``total`` equalizes the total feature evaluations of training, validation and test (the
  kernel-free protocol, ``evaluation.kernel: free`` with ``m_test: train``): with
  ``n_eval = n_val + n_test`` points scored, target ``k (T (T+1) / 2 + n_eval T)``, Doubly SGD's
  training plus its ``k T`` evaluations a scored point (docs/budgets.md §6).

Every budgeted learner declares (in its :class:`~ilnrun.learners.base.BudgetSize`) what one unit
of its size costs over a pass; its size is the target divided by that cost, rounded to the
nearest integer. The proposed learner rounds halves to even (Python's ``round``); a competitor
whose quotient is exactly half-way breaks the tie towards the proposed learner's spend, so that
all learners agree as closely as possible (``k = 1, T = 200``: ``m = 51``, ``r = 101``: 20 298,
20 200 and 20 100 evaluations, within 1% of each other).

A grid setting whose parameters change what a unit of its size spends declares that cost too
(``BudgetSize.setting_cost``) and takes its own size from the same target by the same rule
(:func:`setting_size`): Doubly SGD with ``batch > 1``, and Shrinking Gradient with a non-square
loss, whose unbiased gradient draws ``1/(p − 1)`` further Algorithm-2 estimates a step in
expectation (paper 003's Taylor copies): its ``m`` is sized so that the **expected** spend, the
copies included, meets the target (docs/budgets.md §4a). :func:`derive`'s sizes, and the
proposed learner's spend that breaks the competitors' ties (``anchor``), are those of the
learners' own costs, whatever the settings.

The learners count their own evaluations; ``tests/test_budget.py`` and the contract tests check
the counters against ``expected`` of each spec (``tests/test_sg_budget.py`` the mean of the
copies' random spend against the target).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .learners import LEARNERS

MATCHES = ("evaluations", "samples", "total")


@dataclass(frozen=True)
class Budget:
    """One budget and the size of every budgeted learner (``sizes``: size name -> value)."""

    match: str
    per_round: int  # features per round (budget.dsgd_k)
    T: int
    target: int  # the matched quantity (train_evals, features_sampled or evals_total)
    sizes: dict[str, int] = field(default_factory=dict)
    n_eval: int = 0  # validation + test points scored (the ``total`` convention's)
    anchor: int | None = None  # the proposed learner's spend (the tie rule's reference)

    def size(self, name: str) -> int:
        return self.sizes[name]

    def __getattr__(self, name: str) -> int:  # ``budget.m``: a size by its name
        sizes = self.__dict__.get("sizes", {})
        if name in sizes:
            return sizes[name]
        raise AttributeError(name)


def target(match: str, per_round: int, T: int, n_eval: int = 0) -> int:
    """The budget of ``per_round`` features per round over ``T`` rounds, in the unit of
    ``match`` (``total``: with ``n_eval`` validation and test points scored)."""
    if match == "evaluations":
        return per_round * T * (T + 1) // 2
    if match == "samples":
        return per_round * T
    if match == "total":
        return per_round * (T * (T + 1) // 2 + n_eval * T)
    raise ValueError(f"unknown budget convention {match!r}; expected one of {MATCHES}")


def derive(match: str, per_round: int, T: int, n_eval: int = 0) -> Budget:
    """The target and every registered budgeted learner's size (see the module docstring;
    ``n_eval``: the validation and test points scored, used by ``total`` only)."""
    if T < 2:
        raise ValueError(f"T must be >= 2 to match budgets, got {T}")
    k = int(per_round)
    n_eval = int(n_eval) if match == "total" else 0
    goal = target(match, k, T, n_eval)
    specs = [s for s in LEARNERS.values() if s.budget is not None]
    specs.sort(key=lambda s: s.role != "proposed")  # the proposed learner first (stable)
    sizes: dict[str, int] = {}
    anchor = None  # the proposed learner's spend
    for s in specs:
        cost = s.budget.unit_cost(match, T, n_eval)
        if cost is None:  # a size that cannot be matched under ``total`` (refused if used)
            continue
        size = _rounded(goal, cost, s.role == "proposed", anchor)
        sizes[s.budget.name] = size
        if s.role == "proposed" and anchor is None:
            anchor = size * cost
    return Budget(
        match=match, per_round=k, T=T, target=int(goal), sizes=sizes, n_eval=n_eval, anchor=anchor
    )


def _rounded(goal: int, cost: int | Fraction, proposed: bool, anchor: int | None) -> int:
    """``goal / cost`` rounded: halves to even for the proposed learner, else an exact half
    towards the proposed learner's spend ``anchor`` (the target where there is none). ``cost``
    may be a fraction (a cost in expectation): the quotient is exact either way."""
    q = Fraction(goal, cost)
    if proposed or q.denominator != 2:
        return int(round(q))
    lo = q.numerator // 2
    ref = goal if anchor is None else anchor
    return int(min((lo, lo + 1), key=lambda c: abs(c * cost - ref)))


def setting_size(budget: Budget, method: str, h: dict) -> int:
    """The size learner ``method``'s grid setting ``h`` takes from ``budget``: the budget's size
    for the learner, or, where the setting changes what a unit of the size spends
    (``BudgetSize.setting_cost``: Doubly SGD with ``batch > 1``, Shrinking Gradient with a
    non-square loss), the target divided by that cost, rounded by :func:`derive`'s rule
    (docs/budgets.md §4, §4a)."""
    spec = LEARNERS[method]
    b = spec.budget
    cost = None
    if b.setting_cost is not None:
        cost = b.setting_cost(budget.match, budget.T, budget.n_eval, h)
    if cost is None:
        return budget.size(b.name)
    return _rounded(budget.target, cost, spec.role == "proposed", budget.anchor)


def expected_counts(
    method: str, budget: Budget, T: int | None = None, h: dict | None = None
) -> dict[str, int]:
    """The counters learner ``method`` must report under ``budget`` (its spec's formula; ``T``
    defaults to the budget's); with grid setting ``h``, those of the setting at its own size
    (:func:`setting_size`; in expectation, rounded, for a setting that draws a random number of
    evaluations: ``BudgetSize.expected_for``)."""
    b = LEARNERS[method].budget
    if b is None:
        raise ValueError(f"{method!r} has no feature budget")
    T = budget.T if T is None else T
    if h is None:
        return b.expected(budget.size(b.name), T)
    return b.expected_for(setting_size(budget, method, h), T, h)
