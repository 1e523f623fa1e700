"""Shrinking Gradient with a non-square loss (docs/algorithms.md §1.10): paper 003's unbiased
estimate of ``l'(<f, phi(x)>, y)`` from Algorithm-2 estimates, by a random-length Taylor series
around a pilot estimate.

- every loss with a ``derivative_series`` gives the Taylor coefficients of its ``l'`` (the series
  sums to ``l'`` near the point, its first term is ``derivative`` bit for bit);
- the estimate is unbiased: over many draws for a fixed ``f`` of four terms and a point ``x``
  (coordinate features: the exact ``<f, phi(x)>`` by the kernel), its mean is ``l'(<f,phi(x)>, y)``
  within 4 standard errors of the draws, for the logistic loss beyond its series' radius ``π`` at
  0 and for the smoothed hinge beside its kink, with both forms of the zeroth term; the plug-in
  ``l'(E_t)`` is rejected by the same test (the test can fail);
- the learner's own step is that estimate (a two-round pass, over many seeds);
- its variance falls with ``m`` (the ``exact`` form);
- every copy's evaluations are counted; a cap draws at most ``cap`` copies;
- the square loss is unchanged; the hinge and squared hinge are refused with the reason, the jax
  engine refuses the logistic loss, the compiled pass leaves it to numpy;
- end to end: ``loss: logistic`` on ±1 labels runs and reports ``test_error`` and the copies.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import invoke, refused, write_config
from test_losses import PM1, _pm1_config, toy_pm1

from ilnrun import config as C
from ilnrun.datasets import DATASETS
from ilnrun.features import Coordinate, build_feature_map
from ilnrun.learners import LEARNERS
from ilnrun.learners import shrinking_gradient as sg
from ilnrun.learners.base import KernelExpansion
from ilnrun.learners.taylor import draw_order, estimate_derivative
from ilnrun.losses import LOSSES
from ilnrun.params import ConfigError

SERIES = [n for n, s in LOSSES.items() if s.derivative_series is not None]
# <f, phi(x)> of the fixed problem, per loss: beyond π for the logistic loss (its series at 0
# diverges there), beside the kink y p = 1 for the smoothed hinge
POINTS = {"logistic": 4.6, "smoothed_hinge": 1.2}
Z = 4.0  # the largest |z| of a mean against the exact value


@pytest.fixture
def pm1(monkeypatch):
    monkeypatch.setitem(DATASETS, PM1.name, PM1)


# ----------------------------------------------------------------------------------------------
# the losses' Taylor coefficients


@pytest.mark.parametrize("name", SERIES)
def test_derivative_series_sums_to_the_derivative(name):
    """``sum_k gamma_k h^k = l'(p + h, y)`` for ``|h| <= 1`` (inside every series' radius: the
    logistic's is at least π), ``gamma_0 = derivative(p, y)`` bit for bit, and ``gamma_1`` the
    finite difference of ``derivative``."""
    spec = LOSSES[name]
    for p in (-4.0, -0.3, 0.0, 0.7, 1.0, 3.5, 8.0):
        for y in (1.0, -1.0):
            g = spec.derivative_series(p, y, 60)
            assert g.shape == (61,) and np.all(np.isfinite(g))
            assert g[0] == float(spec.derivative(p, y))
            for h in (-1.0, -0.3, 0.2, 0.9):
                assert np.polyval(g[::-1], h) == pytest.approx(
                    float(spec.derivative(p + h, y)), abs=1e-13
                )
            d = 1e-5
            fd = (spec.derivative(p + d, y) - spec.derivative(p - d, y)) / (2 * d)
            assert g[1] == pytest.approx(float(fd), rel=1e-6, abs=1e-12)


def test_the_order_has_paper_003_s_law():
    """``P(N = n) = (p − 1) / p^{n+1}``: the frequencies of ``N`` for p = 2 and 3."""
    rng = np.random.default_rng(0)
    for p in (2.0, 3.0):
        n = np.array([draw_order(rng, p) for _ in range(40000)])
        assert n.min() == 0
        for k in range(4):
            prob = (p - 1) / p ** (k + 1)
            sd = math.sqrt(prob * (1 - prob) / len(n))
            assert abs(np.mean(n == k) - prob) <= Z * sd, (p, k)


# ----------------------------------------------------------------------------------------------
# the estimate is unbiased


def problem(target: float):
    """A fixed ``f`` of four terms (coordinate features, D = 4) and a point ``x`` with
    ``<f, phi(x)> = target`` exactly (the kernel ``x . x' / D``): ``(f, X_train, x, fmap,
    <f, phi(x)>)`` (bench/sg_unbiased.py measures the same problem)."""
    X_train = np.array(
        [[2.0, 1.5, 2.5, 1.0], [1.0, 2.0, 0.5, 2.5], [2.5, -0.5, 1.5, 2.0], [-1.0, 1.0, 2.0, 0.5]]
    )
    x = np.array([[2.0, 2.0, 2.0, 2.0]])
    fmap = Coordinate(4)
    alpha = np.array([0.4, 0.3, 0.25, -0.1])
    alpha = alpha * target / float(alpha @ fmap.kernel(X_train, x)[:, 0])
    return KernelExpansion(alpha), X_train, x, fmap, float(alpha @ fmap.kernel(X_train, x)[:, 0])


def draws(loss: str, y: float, m: int, n: int, seed: int, **kw) -> tuple[np.ndarray, float]:
    """``n`` estimates of ``l'(<f, phi(x)>, y)``, each around its own pilot Algorithm-2 estimate
    over further Algorithm-2 estimates (``m`` samples each), and the exact value."""
    f, X_train, x, fmap, mu = problem(POINTS[loss])
    spec, rng = LOSSES[loss], np.random.default_rng(seed)

    def copy() -> float:
        return float(f.estimate_numpy(X_train, x, fmap, m, rng)[0])

    out = np.empty(n)
    for j in range(n):
        out[j] = estimate_derivative(
            lambda x0, k: spec.derivative_series(x0, y, k), copy(), copy, rng, **kw
        )[0]
    return out, float(spec.derivative(mu, y))


def z_score(g: np.ndarray, exact: float) -> float:
    return float((g.mean() - exact) / (g.std(ddof=1) / math.sqrt(len(g))))


@pytest.mark.parametrize("loss", list(POINTS))
@pytest.mark.parametrize("y", [1.0, -1.0])
@pytest.mark.parametrize("zeroth", ["exact", "sampled"])
def test_the_gradient_estimate_is_unbiased(loss, y, zeroth):
    """The mean of 20 000 estimates is ``l'(<f, phi(x)>, y)`` within 4 standard errors, at
    ``<f, phi(x)> = 4.6`` for the logistic loss (beyond π: a series around 0 would diverge) and
    1.2 for the smoothed hinge; ``m = 100`` samples an Algorithm-2 estimate."""
    g, exact = draws(loss, y, 100, 20000, 11, zeroth=zeroth)
    assert abs(z_score(g, exact)) <= Z, (g.mean(), exact, g.std())


@pytest.mark.parametrize("loss, y", [("logistic", 1.0), ("smoothed_hinge", -1.0)])
def test_the_plug_in_gradient_fails_the_same_test(loss, y):
    """``l'(E_t)`` at the pilot alone — what a step would use without paper 003's series — is
    biased, and the test above rejects it (so that test can fail)."""
    f, X_train, x, fmap, mu = problem(POINTS[loss])
    rng, spec = np.random.default_rng(11), LOSSES[loss]
    pilots = f.estimate_numpy(X_train, np.repeat(x, 20000, axis=0), fmap, 100, rng)
    assert abs(z_score(spec.derivative(pilots, y), float(spec.derivative(mu, y)))) > 2 * Z


@pytest.mark.parametrize("loss", list(POINTS))
def test_the_learner_s_step_is_the_unbiased_estimate(loss):
    """Two rounds of the learner: round 1 appends ``alpha_0 = -eta l'(0, y_0)`` (exact: ``f = 0``),
    round 2 steps ``alpha_1 = -eta g`` with ``g`` its estimate of ``l'(alpha_0 k(x_0, x_1), y_1)``;
    over many seeds the mean of ``g`` is that value within 4 standard errors (the pass's own
    Algorithm 2, series and draws), beyond π for the logistic loss."""
    x0 = np.array([2.0, 1.5, 2.5, 1.0])
    x1 = np.array([2.0, 2.0, 2.0, 2.0])
    X, y = np.stack([x0, x1]), np.array([-1.0, 1.0])
    fmap, spec = Coordinate(4), LOSSES[loss]
    k01 = float(fmap.kernel(x0[None], x1[None])[0, 0])
    eta = POINTS[loss] / (-float(spec.derivative(0.0, y[0])) * k01)  # <f_1, phi(x_1)> = POINTS
    alpha0 = -eta * float(spec.derivative(0.0, y[0]))
    mu = alpha0 * k01
    assert mu == pytest.approx(POINTS[loss])
    g = np.empty(4000)
    for seed in range(len(g)):
        res = sg.fit_numpy(X, y, fmap, np.random.default_rng(seed), eta=eta, m=50, B=10.0,
                           loss=loss)  # fmt: skip
        assert res.predictor.alpha[0] == alpha0 and res.counters["shrinks"] == 0
        g[seed] = -res.predictor.alpha[1] / eta
        # every copy counted: 2 m a copy, the pilot's included
        assert res.counters["train_evals"] == 2 * 50 * (1 + res.counters["taylor_copies"])
    assert abs(z_score(g, float(spec.derivative(mu, y[1])))) <= Z


def test_the_variance_falls_with_m():
    """The ``exact`` form's variance falls as ``m`` grows (about as ``1/m``; the numbers are in
    docs/algorithms.md §1.10, from bench/sg_unbiased.py); the printed form keeps a floor of about
    ``gamma_0^2 / (p − 1)``."""
    for loss in POINTS:
        var = [draws(loss, 1.0, m, 4000, 5)[0].var(ddof=1) for m in (30, 100, 300)]
        assert var[0] > 2 * var[1] > 4 * var[2], (loss, var)
    sampled = [draws("logistic", -1.0, m, 4000, 5, zeroth="sampled")[0].var() for m in (100, 300)]
    gamma0 = float(LOSSES["logistic"].derivative(POINTS["logistic"], -1.0))
    assert min(sampled) > 0.8 * gamma0**2  # p = 2


def test_a_cap_bounds_the_copies_and_the_zeroth_term_alone_when_n_exceeds_it():
    rng = np.random.default_rng(3)
    calls = []

    def copy() -> float:
        calls.append(1)
        return 0.5

    series = LOSSES["logistic"].derivative_series
    for _ in range(2000):
        calls.clear()
        g, n = estimate_derivative(lambda x0, k: series(x0, 1.0, k), 0.3, copy, rng, cap=2)
        assert n == len(calls) <= 2
    g, n = estimate_derivative(lambda x0, k: series(x0, 1.0, k), 0.3, copy, rng, cap=-1)
    assert (g, n) == (float(series(0.3, 1.0, 0)[0]), 0)


# ----------------------------------------------------------------------------------------------
# the learner


def test_the_square_loss_pass_is_unchanged():
    """``loss="square"`` with any taylor_* value: the pass is Algorithm 1's (the same numbers,
    no copies, no ``taylor_copies`` counter)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 4)) / 2.0
    y = np.tanh(X[:, 0])
    fmap = build_feature_map({"kind": "relu"}, X)
    a = sg.fit_numpy(X, y, fmap, np.random.default_rng(1), eta=0.4, m=20)
    b = sg.fit_numpy(X, y, fmap, np.random.default_rng(1), eta=0.4, m=20, loss="square",
                     taylor_p=3.0, taylor_cap=1, taylor_zeroth="sampled")  # fmt: skip
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_array_equal(a.predictor.alpha, b.predictor.alpha)
    assert a.counters == b.counters and "taylor_copies" not in a.counters


def test_compiled_leaves_the_logistic_loss_to_numpy(capsys, monkeypatch):
    from ilnrun.learners import shrinking_gradient_kernels as kernels

    # the note is printed once a process (and its workers): forget the notes of earlier tests
    monkeypatch.setattr(kernels, "_NOTED", set())
    monkeypatch.delenv(kernels.NOTED_ENV, raising=False)
    d = toy_pm1(np.random.default_rng(0), D=4, T=60, n_val=5, n_test=5, flip=0.1)
    fmap = build_feature_map({"kind": "relu"}, d.X_train)
    kw = dict(eta=0.3, m=20, loss="logistic")
    a = sg.fit(d.X_train, d.y_train, fmap, np.random.default_rng(2), **kw)
    b = sg.fit_numpy(d.X_train, d.y_train, fmap, np.random.default_rng(2), **kw)
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_array_equal(a.predictor.alpha, b.predictor.alpha)
    assert a.counters == b.counters and a.counters["taylor_copies"] > 0
    assert "loss = 'logistic' is not implemented by the compiled pass" in capsys.readouterr().err
    with pytest.raises(ValueError, match="square loss only"):
        sg.fit_compiled(d.X_train, d.y_train, fmap, np.random.default_rng(2), **kw)
    with pytest.raises(ValueError, match="derivative_series"):
        sg.fit_numpy(d.X_train, d.y_train, fmap, np.random.default_rng(2), eta=0.3, m=5,
                     loss="hinge")  # fmt: skip


def test_shrinking_gradient_takes_the_losses_with_a_series():
    assert set(LEARNERS["shrinking_gradient"].supported_losses) == {"square", *SERIES}
    assert {"logistic", "smoothed_hinge"} <= set(SERIES)


@pytest.mark.parametrize(
    "loss, words",
    [
        ("hinge", ["discontinuous", "paper 003", "smoothed_hinge"]),
        ("squared_hinge", ["not analytic", "kink"]),
    ],
)
def test_non_analytic_losses_are_refused_with_the_reason(pm1, tmp_path, loss, words):
    cfg = _pm1_config(shrinking_gradient={"eta": 0.3, "loss": loss})
    with pytest.raises(ConfigError, match="methods.shrinking_gradient.loss"):
        C.resolve(cfg)
    res = invoke(["validate", write_config(tmp_path / "c.yaml", cfg)])
    refused(res, "methods.shrinking_gradient.loss:", "logistic", *words)


def test_jax_refuses_a_non_square_loss(pm1):
    cfg = _pm1_config(shrinking_gradient={"eta": 0.3, "loss": "logistic"}) | {"engine": "jax"}
    with pytest.raises(ConfigError, match=r"methods\.shrinking_gradient\.loss: loss = 'logistic'"):
        C.resolve(cfg)


def test_taylor_keys_leave_square_loss_cells_alone(pm1):
    """The ``taylor_*`` keys are unused with the square loss: no key, setting or cell changes;
    with the logistic loss a non-default value is a cell of its own."""
    plain = C.resolve(_pm1_config(shrinking_gradient={"eta": 0.3}))
    tuned = C.resolve(_pm1_config(shrinking_gradient={"eta": 0.3, "taylor_p": [2.0, 3.0]}))
    assert [c.key for c in C.cells(plain)] == [c.key for c in C.cells(tuned)]
    logistic = C.resolve(
        _pm1_config(shrinking_gradient={"eta": 0.3, "loss": "logistic", "taylor_p": [2.0, 3.0]})
    )
    hypers = [c.key["hyper"] for c in C.cells(logistic) if c.rep == 0]
    assert [h.get("taylor_p") for h in hypers] == [None, 3.0]  # the default is left out


def test_logistic_shrinking_gradient_end_to_end(pm1, tmp_path: Path):
    """``loss: logistic`` for Shrinking Gradient on ±1 labels: validates, runs, reports
    ``test_error`` and the copies, whose evaluations are in ``train_evals``."""
    cfg = _pm1_config(shrinking_gradient={"eta": 0.3, "loss": "logistic"})
    cfg["budget"] = {"dsgd_k": 2}
    path = write_config(tmp_path / "sg.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    out = tmp_path / "sg"
    run = invoke(["run", path, "--out", out, "-q"])
    assert run.exit_code == 0, run.output
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["loss"] == "logistic").all() and len(runs) == 2
    for _, r in runs.iterrows():
        assert 0.0 <= r["test_error"] <= 1.0 and np.isfinite(r["test_loss"])
        m, T = int(r["m"]), int(r["rounds"])
        assert r["taylor_copies"] > 0
        assert r["train_evals"] == 2 * m * (T - 1 + r["taylor_copies"])
        assert r["features_sampled"] == m * (T - 1 + r["taylor_copies"])
    summary = pd.read_csv(out / "summary.csv")
    assert "taylor_copies_mean" in summary and "test_error_mean" in summary
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
