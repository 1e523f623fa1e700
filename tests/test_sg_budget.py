"""Shrinking Gradient's budget with a non-square loss (docs/budgets.md §4a): paper 003's unbiased
gradient draws ``N'`` further Algorithm-2 estimates of ``m`` samples a gradient step (its Taylor
copies, docs/algorithms.md §1.10), and ``m`` is sized so that the **expected** spend, the copies
included, meets the matched target.

- the law of the copies: ``E[N']`` and ``Var N'`` (``ilnrun.learners.taylor.copies_mean``,
  ``copies_variance``) equal the sums over ``P(N = n) = (p − 1)/p^{n+1}``, with and without a
  cap, and the draws of the pass follow them;
- the square loss keeps the budget's ``m`` in every setting (its committed numbers do not move);
- a non-square setting's ``m`` is ``round(target / cost)`` with the cost written out here from
  the law (not from the code's formula), under every convention;
- **the statistical test**: with matched budgets, the mean over seeds of the counted spend of
  Shrinking Gradient with the logistic loss is within a tolerance of the target derived from
  ``Var N'`` (below); the size the budget gave before (the square loss's ``m``) is outside it, so
  the test can fail;
- ``ilnrun validate``, ``run`` and ``report`` show and use the setting's own ``m``; a setting
  whose ``m`` would be 0 is refused (exit 2, ``budget.dsgd_k``).

**The tolerance.** A pass of ``T`` rounds without a shrink draws ``C = Σ_{t=2..T} N'_t`` copies,
the ``N'_t`` independent, so ``E[C] = (T − 1) E[N']`` and ``Var C = (T − 1) Var N'``; it counts
``u (T − 1 + C)`` units (``u = 2m`` evaluations, or ``m`` draws under ``samples``), and under
``total`` ``2 m n_eval`` more for its validation and test estimates (no copy). Over ``R``
independent seeds the mean counted spend has expectation ``m · cost`` and standard error
``se = u √((T − 1) Var N' / R)``. The budget rounds ``m`` to the nearest integer, so
``|m · cost − target| <= cost / 2``. The test accepts ``|mean − target| <= cost / 2 + 4 se``
(four standard errors: a two-sided normal tail of 6e-5; the seeds are fixed, so the outcome is
too) and, tighter, ``|mean − m · cost| <= 4 se``. A shrink round draws no copy, so the test's
setting is chosen not to shrink (``B = 100``, ``eta = 0.1``), and it checks that none did.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, refused, write_config
from test_losses import PM1, _pm1_config, toy_pm1

from ilnrun import config as C
from ilnrun.budget import MATCHES, derive, expected_counts, setting_size, target
from ilnrun.features import build_feature_map
from ilnrun.learners import LEARNERS
from ilnrun.learners import shrinking_gradient as sg
from ilnrun.learners.taylor import copies_mean, copies_variance, draw_order

SG = "shrinking_gradient"
SPEC = LEARNERS[SG]


def law(p: float, cap: int | None, upto: int = 4000) -> tuple[float, float]:
    """``(E[N'], Var N')`` summed term by term: ``N' = N`` where ``N <= cap``, else 0."""
    q = 1.0 / p
    top = upto if cap is None else cap
    probs = [(1 - q) * q**n for n in range(top + 1)]
    mean = sum(n * w for n, w in enumerate(probs))
    second = sum(n * n * w for n, w in enumerate(probs))
    return mean, second - mean * mean


def unit_cost(match: str, T: int, n_eval: int, p: float, cap: int | None) -> float:
    """What one sample of ``m`` spends over a pass in expectation, written out from the pass:
    ``E_t`` and ``E[N']`` copies of ``m`` samples (2 evaluations each) in each of the rounds
    2..T, and under ``total`` one estimate of ``m`` samples at each scored point."""
    per_round = 1.0 + law(p, cap)[0]
    return {
        "evaluations": 2 * (T - 1) * per_round,
        "samples": (T - 1) * per_round,
        "total": 2 * (T - 1) * per_round + 2 * n_eval,
    }[match]


def logistic(p: float = 2.0, cap: int | None = None, **more) -> dict:
    """A resolved Shrinking Gradient setting with the logistic loss."""
    section = {"eta": 0.3, "loss": "logistic", "taylor_p": p, "taylor_cap": cap, **more}
    (h,) = C.method_grid(SG, section)
    return h


# ----------------------------------------------------------------------------------------------
# the law of the copies


@pytest.mark.parametrize("p", [1.1, 1.5, 2.0, 3.0, 7.0])
@pytest.mark.parametrize("cap", [None, 0, 1, 2, 5, 60])
def test_the_copies_law_is_the_sum_over_n(p, cap):
    mean, var = law(p, cap)
    assert copies_mean(p, cap) == pytest.approx(mean, rel=1e-12, abs=1e-12)
    assert copies_variance(p, cap) == pytest.approx(var, rel=1e-10, abs=1e-12)
    if cap is None:
        assert copies_mean(p) == pytest.approx(1 / (p - 1)) and copies_variance(p) == (
            pytest.approx(p / (p - 1) ** 2)
        )


@pytest.mark.parametrize("p,cap", [(2.0, None), (3.0, 2), (1.5, 4)])
def test_the_pass_draws_copies_by_that_law(p, cap):
    """``draw_order`` (the pass's draw of ``N``), capped as ``estimate_derivative`` caps it: the
    mean and variance of 40 000 draws within 5 standard errors of the law."""
    rng = np.random.default_rng(11)
    n = np.array([draw_order(rng, p) for _ in range(40_000)])
    if cap is not None:
        n = np.where(n > cap, 0, n)
    mean, var = copies_mean(p, cap), copies_variance(p, cap)
    assert abs(n.mean() - mean) <= 5 * math.sqrt(var / len(n))
    assert abs(n.var() - var) <= 5 * np.std((n - mean) ** 2) / math.sqrt(len(n))


# ----------------------------------------------------------------------------------------------
# the derived sizes


@pytest.mark.parametrize("match", MATCHES)
@pytest.mark.parametrize("T,k,n_eval", [(2, 1, 0), (30, 4, 90), (200, 1, 300), (201, 16, 155)])
def test_the_square_loss_keeps_the_budgets_m(match, T, k, n_eval):
    """Every square-loss setting, ``taylor_*`` given or not, takes the budget's own ``m`` and
    expects its own counters: the committed square-loss numbers cannot move."""
    b = derive(match, k, T, n_eval)
    for section in (
        {"eta": [0.1, 0.3], "average": [False, True]},
        {"eta": 0.3, "loss": "square", "taylor_p": [2.0, 3.0], "taylor_cap": 2},
        {"eta": 0.3, "sampler": "systematic", "taylor_zeroth": "sampled"},
    ):
        for h in C.method_grid(SG, section):
            assert sg.estimates_per_round(h) == 1
            assert SPEC.budget.setting_cost(match, T, b.n_eval, h) is None
            assert setting_size(b, SG, h) == b.size("m")
            assert expected_counts(SG, b, h=h) == expected_counts(SG, b)


@pytest.mark.parametrize("match", MATCHES)
@pytest.mark.parametrize("p,cap", [(2.0, None), (3.0, None), (1.5, None), (2.0, 2), (3.0, 0)])
@pytest.mark.parametrize("T,k,n_eval", [(30, 4, 90), (200, 1, 300), (200, 16, 155), (77, 3, 0)])
def test_a_non_square_m_meets_the_target_in_expectation(match, p, cap, T, k, n_eval):
    b = derive(match, k, T, n_eval)
    h = logistic(p, cap)
    cost = unit_cost(match, T, b.n_eval, p, cap)
    goal = target(match, k, T, b.n_eval)
    m = setting_size(b, SG, h)
    assert m == round(goal / cost)
    assert abs(m * cost - goal) <= cost / 2 + 1e-6
    own = SPEC.budget.setting_cost(match, T, b.n_eval, h)  # None: no copy, the budget's cost
    assert float(own or SPEC.budget.unit_cost(match, T, b.n_eval)) == pytest.approx(cost)
    assert (own is None) == (cap == 0)
    if cap != 0:  # copies are drawn: a smaller m than the square loss's (whose unit is cheaper)
        assert m <= b.size("m")
    else:  # no copy: the square loss's cost, and its m
        assert m == b.size("m")
    # the counters in expectation (no shrink)
    exp = expected_counts(SG, b, h=h)
    per_round = 1 + copies_mean(p, cap)
    assert exp["train_evals"] == pytest.approx(2 * m * (T - 1) * per_round, abs=0.5)
    assert exp["features_sampled"] == pytest.approx(m * (T - 1) * per_round, abs=0.5)


def test_the_worked_example_of_the_docs():
    """docs/budgets.md §4a: ``T = 200``, ``k = 1``, logistic, ``taylor_p = 2``."""
    b = derive("evaluations", 1, 200)
    assert setting_size(b, SG, logistic()) == 25 and b.size("m") == 51
    assert [setting_size(derive("evaluations", k, 200), SG, logistic()) for k in (4, 16)] == [
        101,
        404,
    ]
    assert [setting_size(derive("total", k, 200, 300), SG, logistic()) for k in (1, 4, 16)] == [
        57,
        230,
        918,
    ]
    assert sg.estimates_per_round(logistic()) == 2
    assert sg.estimates_per_round(logistic(3.0, 2)) == 1 + Fraction(copies_mean(3.0, 2))


# ----------------------------------------------------------------------------------------------
# the statistical test: the counted spend over seeds against the target


def _spend(match: str, res, m: int, n_eval: int) -> int:
    """The counted spend of a pass in the unit of ``match`` (``total``: its validation and test
    estimates, one Algorithm-2 estimate of the training ``m`` a point, added)."""
    c = res.counters
    if match == "samples":
        return c["features_sampled"]
    return c["train_evals"] + (2 * m * n_eval if match == "total" else 0)


@pytest.mark.parametrize(
    "match,k,p,cap",
    [
        ("evaluations", 1, 2.0, None),
        ("evaluations", 4, 3.0, 2),
        ("samples", 8, 2.0, None),
        ("total", 2, 1.5, None),
    ],
)
def test_matched_logistic_spends_the_target_on_average(match, k, p, cap):
    """The mean over ``R`` seeds of the spend Shrinking Gradient with the logistic loss counts,
    at the ``m`` the budget derives, is within ``cost/2 + 4 u √((T − 1) Var N' / R)`` of the
    target (module docstring); at the square loss's ``m`` (what the budget gave before) it is
    not."""
    T, R, n_eval = 120, 40, 60
    b = derive(match, k, T, n_eval)
    h = logistic(p, cap, eta=0.1, B=100.0)  # a shrink (|E_t| >= 16 B) draws no copy: none here
    m = setting_size(b, SG, h)
    goal = target(match, k, T, b.n_eval)
    args = SPEC.fit_arguments(h, m, T)
    spends, copies = [], []
    for seed in range(R):
        d = toy_pm1(np.random.default_rng(seed), D=5, T=T, n_val=1, n_test=1, flip=0.1)
        fmap = build_feature_map({"kind": "relu"}, d.X_train)
        res = SPEC.fit(d.X_train, d.y_train, fmap, np.random.default_rng(1000 + seed), **args)
        assert not res.diverged and res.counters["shrinks"] == 0  # the test's premise
        spends.append(_spend(match, res, m, b.n_eval))
        copies.append(res.counters["taylor_copies"])
    u = m if match == "samples" else 2 * m  # units a copy spends
    cost = unit_cost(match, T, b.n_eval, p, cap)
    var = copies_variance(p, cap)
    se = u * math.sqrt((T - 1) * var / R)  # the standard error of the mean spend
    tol = cost / 2 + 4 * se
    mean = float(np.mean(spends))
    assert abs(mean - goal) <= tol, (mean, goal, tol)
    # tighter: the mean is within 4 standard errors of the expected spend at this m
    assert abs(mean - m * cost) <= 4 * se, (mean, m * cost, se)
    # the copies themselves: within 4 standard errors of (T - 1) E[N']
    assert abs(np.mean(copies) - (T - 1) * copies_mean(p, cap)) <= 4 * math.sqrt((T - 1) * var / R)
    # the test can fail: at the square loss's m (the budget's before, blind to the copies) the
    # expected spend is further from the target than the tolerance and 4 of its standard errors
    before = b.size("m")
    assert abs(before * cost - goal) > tol + 4 * se * before / m


# ----------------------------------------------------------------------------------------------
# validate, run, report


@pytest.fixture
def pm1(monkeypatch):
    from ilnrun.datasets import DATASETS

    monkeypatch.setitem(DATASETS, PM1.name, PM1)


def test_validate_run_and_report_use_the_settings_own_m(pm1, tmp_path: Path):
    """``validate`` prints the logistic setting's ``m`` (and why), ``run`` runs every cell with
    it, the report's derived-size table shows it, with the square loss's ``m`` named."""
    cfg = _pm1_config(shrinking_gradient={"eta": [0.1, 0.3], "loss": "logistic"})
    cfg["budget"] = {"dsgd_k": 2}
    T = cfg["dataset"]["T"]
    b = derive("evaluations", 2, T)
    m = setting_size(b, SG, logistic())
    assert m < b.size("m")
    path = write_config(tmp_path / "c.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    assert f"m={m} (shrinking_gradient)" in val.output
    assert f"#     m={m} (shrinking_gradient: " in val.output and "2 settings" in val.output
    assert "Taylor copies" in val.output
    out = tmp_path / "out"
    run = invoke(["run", path, "--out", out, "-q"])
    assert run.exit_code == 0, run.output
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["m"]) == {m}
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    text = (out / "REPORT.md").read_text()
    assert f"| {T} | 2 | {b.target:,} | {m} (loss logistic, taylor_p 2) |" in text
    assert "Shrinking Gradient's m per value of `loss`, `taylor_p`, `taylor_cap`" in text


def test_the_square_loss_report_table_is_the_budgets(pm1, tmp_path: Path):
    cfg = _pm1_config(shrinking_gradient={"eta": 0.3})
    cfg["repetitions"] = 1
    path = write_config(tmp_path / "c.yaml", cfg)
    out = tmp_path / "out"
    assert invoke(["run", path, "--out", out, "-q"]).exit_code == 0
    assert invoke(["report", out]).exit_code == 0
    b = derive("evaluations", 2, cfg["dataset"]["T"])
    text = (out / "REPORT.md").read_text()
    assert f"| {b.target:,} | {b.size('m')} |" in text and "own unit cost" not in text


def test_a_setting_whose_m_would_be_zero_is_refused(pm1, tmp_path: Path):
    """``taylor_p = 1.05`` draws 20 copies a step in expectation: under ``samples`` with
    ``dsgd_k = 1`` its ``m`` rounds to 0 while the budget's is 1."""
    cfg = _pm1_config(shrinking_gradient={"eta": 0.3, "loss": "logistic", "taylor_p": 1.05})
    cfg["budget"] = {"match": "samples", "dsgd_k": 1}
    assert derive("samples", 1, 60).size("m") == 1
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, "budget.dsgd_k", "m = 0 < 1", "taylor_p=1.05")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
