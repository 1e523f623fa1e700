"""Feature budgets (docs/budgets.md): derivation of k, r, m and the learners' own counters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilnrun import budget
from ilnrun.datasets import clipped_gaussian
from ilnrun.features import Coordinate
from ilnrun.learners import LEARNERS

BUDGETED = ("shrinking_gradient", "doubly_sgd", "fixed_random")
HYPER = {  # step sizes small enough that no pass diverges (a diverged pass stops counting)
    "shrinking_gradient": {"eta": 0.3, "B": 1.0},
    "doubly_sgd": {"eta": 0.3},
    "fixed_random": {"eta": 0.3},
}


def test_derive_evaluations():
    b = budget.derive("evaluations", 4, 200)
    assert b.match == "evaluations" and b.k == 4
    assert b.target == 4 * 200 * 201 // 2 == 80400
    assert b.r == 402  # k (T+1) / 2 = 402
    assert b.m == 202  # k T (T+1) / (4 (T-1)) = 202.01
    b = budget.derive("evaluations", 3, 30)
    assert b.target == 3 * 30 * 31 // 2 == 1395
    assert b.r == round(3 * 31 / 2)  # 46.5 -> 46 (round half to even)
    assert b.m == 24  # 3 * 30 * 31 / (4 * 29) = 24.05


def test_derive_samples():
    b = budget.derive("samples", 4, 200)
    assert b.match == "samples"
    assert (b.k, b.r, b.m, b.target) == (4, 800, 4, 800)  # m = 800 / 199 = 4.02
    b = budget.derive("samples", 7, 10)
    assert (b.r, b.m, b.target) == (70, 8, 70)  # m = 70 / 9 = 7.78


def test_derive_rejects_bad_arguments():
    with pytest.raises(ValueError):
        budget.derive("evaluations", 4, 1)
    with pytest.raises(ValueError):
        budget.derive("flops", 4, 100)
    with pytest.raises(ValueError):
        budget.expected_counts("kernel_ogd", budget.derive("evaluations", 4, 30), 30)


def _run(method: str, b: budget.Budget, T: int, D: int = 25, seed: int = 0):
    d = clipped_gaussian(np.random.default_rng(seed), D=D, T=T, n_val=1, n_test=1, sparsity=3)
    info = LEARNERS[method]
    hyper = {**HYPER[method], info.budget.name: b.size(info.budget.name)}
    res = info.fit(d.X_train, d.y_train, Coordinate(D), np.random.default_rng(seed + 1), **hyper)
    assert not res.diverged
    return res


@pytest.mark.parametrize("match", budget.MATCHES)
@pytest.mark.parametrize("method", BUDGETED)
def test_counters_equal_expected_counts(method, match):
    """The counters each learner keeps in its own loop equal the formulas of their specs."""
    T = 30
    b = budget.derive(match, 4, T)
    res = _run(method, b, T)
    expected = budget.expected_counts(method, b, T)
    assert {k: res.counters[k] for k in expected} == expected
    assert res.counters["kernel_evals"] == 0


def test_kernel_ogd_counts_kernel_values_not_features():
    T = 30
    d = clipped_gaussian(np.random.default_rng(0), D=10, T=T, n_val=1, n_test=1, sparsity=3)
    res = LEARNERS["kernel_ogd"].fit(d.X_train, d.y_train, Coordinate(10), None, eta=0.3)
    assert res.counters["train_evals"] == 0 and res.counters["features_sampled"] == 0
    assert res.counters["kernel_evals"] == T * (T - 1) // 2


@pytest.mark.parametrize("k,T", [(4, 30), (2, 100), (8, 200), (1, 150)])
def test_evaluations_budget_matched_within_one_percent(k, T):
    """Under ``evaluations`` the three learners' measured train_evals are within 1% of the
    target (Doubly SGD's k T (T+1) / 2)."""
    b = budget.derive("evaluations", k, T)
    for method in BUDGETED:
        evals = _run(method, b, T).counters["train_evals"]
        assert abs(evals - b.target) <= 0.01 * b.target, (method, evals, b.target)
    assert _run("doubly_sgd", b, T).counters["train_evals"] == b.target


@pytest.mark.parametrize("k,T", [(4, 30), (3, 77)])
def test_samples_budget_matched(k, T):
    """Under ``samples`` features_sampled is k T for Doubly SGD and r = k T for Fixed-Random
    exactly; m (T-1) for Shrinking Gradient, within (T-1)/2 from rounding m."""
    b = budget.derive("samples", k, T)
    got = {m: _run(m, b, T).counters["features_sampled"] for m in BUDGETED}
    assert got["doubly_sgd"] == b.target == k * T
    assert got["fixed_random"] == b.target
    assert abs(got["shrinking_gradient"] - b.target) <= (T - 1) / 2


@settings(max_examples=300, deadline=None)
@given(
    T=st.integers(min_value=2, max_value=400),
    k=st.integers(min_value=1, max_value=50),
    match=st.sampled_from(("evaluations", "samples")),  # total: test_total_*
)
def test_derived_sizes_match_target_within_rounding(T, k, match):
    """r, m >= 1, and each learner's matched total agrees with the target to within rounding:
    r and m are the exact real solutions rounded to the nearest integer, so they are off by at
    most 1/2, and a total that is (coefficient) x (size) is off by at most coefficient / 2:
      evaluations: kT(T+1)/2 exact; |2m(T-1) - target| <= (T-1); |rT - target| <= T/2;
      samples:     kT exact;        |m(T-1) - target| <= (T-1)/2; r == target."""
    b = budget.derive(match, k, T)
    assert b.k == k and b.r >= 1 and b.m >= 1
    if match == "evaluations":
        assert b.target == k * T * (T + 1) // 2
        assert abs(2 * b.m * (T - 1) - b.target) <= T - 1
        assert 2 * abs(b.r * T - b.target) <= T
    else:
        assert b.target == k * T
        assert 2 * abs(b.m * (T - 1) - b.target) <= T - 1
        assert b.r == b.target
    # the formulas used to check the learners' counters agree with the matched totals
    exp = {m: budget.expected_counts(m, b, T) for m in BUDGETED}
    key = "train_evals" if match == "evaluations" else "features_sampled"
    assert exp["doubly_sgd"][key] == b.target
    assert exp["fixed_random"][key] == b.r * (T if match == "evaluations" else 1)
    assert exp["shrinking_gradient"][key] == b.m * (T - 1) * (2 if match == "evaluations" else 1)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("T", [200, 201, 1000])
def test_three_learners_agree_within_one_percent_of_each_other(k, T):
    """Under `evaluations` the formulas give DSGD k T (T+1)/2, FR r T and SG 2 m (T-1): at the
    sizes of configs/figure1.yaml every pair agrees within 1% (ties in r are broken towards
    SG's count; k = 1, T = 200 is the tightest case: 20 100, 20 200, 20 298)."""
    b = budget.derive("evaluations", k, T)
    counts = [b.k * T * (T + 1) // 2, b.r * T, 2 * b.m * (T - 1)]
    for a in counts:
        for c in counts:
            assert abs(a - c) <= 0.01 * b.target
