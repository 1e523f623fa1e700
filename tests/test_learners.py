"""Doubly SGD, Fixed-Random and kernel OGD: they learn, and they equal literal
re-implementations of their update rules (docs/algorithms.md §2-§4)."""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.datasets import clipped_gaussian
from ilnrun.features import Coordinate, Fourier, ReLU
from ilnrun.learners import LEARNERS, doubly_sgd, fixed_random, kernel_ogd
from ilnrun.learners.base import DIVERGENCE_BOUND, is_divergent
from ilnrun.schedules import step_sizes


def _problem(D=20, T=300, seed=0):
    return clipped_gaussian(np.random.default_rng(seed), D=D, T=T, n_val=10, n_test=300, sparsity=5)


def _half_sq(pred, y):
    return 0.5 * float(np.mean((pred - y) ** 2))


@pytest.mark.parametrize(
    "method,hyper", [("doubly_sgd", {"eta": 0.3, "k": 4}), ("fixed_random", {"eta": 0.3, "r": 602})]
)
def test_learner_reduces_loss_on_noiseless_problem(method, hyper):
    """y = a . x with a in the span of training points: the online loss of the second half is
    below the first half's and the test loss is far below the zero predictor's."""
    d = _problem()
    res = LEARNERS[method].fit(
        d.X_train, d.y_train, Coordinate(20), np.random.default_rng(1), **hyper
    )
    assert not res.diverged and len(res.losses) == len(d.y_train)
    h = len(res.losses) // 2
    assert res.losses[h:].mean() < 0.7 * res.losses[:h].mean()
    assert _half_sq(res.predictor.predict(d.X_test), d.y_test) < 0.25 * _half_sq(0.0, d.y_test)


def test_kernel_ogd_reduces_loss():
    d = _problem()
    fmap = Coordinate(20)
    res = kernel_ogd.fit(d.X_train, d.y_train, fmap, None, eta=0.3)
    pred = res.predictor.predict_exact(fmap.kernel(d.X_test, d.X_train))
    assert _half_sq(pred, d.y_test) < 0.25 * _half_sq(0.0, d.y_test)


# ----------------------------------------------------------------------------------------------
# literal re-implementations


def _literal_dsgd(X, y, fmap, rng, eta, k, nu, schedule):
    """Dai et al. Algorithms 1-2 with an explicit O(T^2) loop decaying every old coefficient.
    Draws: one ``fmap.sample(rng, k)`` per round after the prediction, like the learner."""
    gammas = step_sizes(schedule, eta, len(y))
    W, alpha, losses = None, [], []
    for t in range(len(y)):
        pred = 0.0
        for j in range(len(alpha)):
            pred += alpha[j] * float(fmap.point(X[t], W[j : j + 1])[0])
        losses.append(0.5 * (pred - y[t]) ** 2)
        omega = fmap.sample(rng, k)
        new = [
            -gammas[t] * (pred - y[t]) * float(fmap.point(X[t], omega[j : j + 1])[0]) / k
            for j in range(k)
        ]
        for j in range(len(alpha)):
            alpha[j] = (1.0 - gammas[t] * nu) * alpha[j]
        alpha.extend(new)
        W = omega if W is None else np.concatenate([W, omega])
    return W, np.array(alpha), np.array(losses)


@pytest.mark.parametrize(
    "fmap,eta,nu,schedule,rescale",
    [
        (Coordinate(8), 0.3, 0.3, "constant", None),
        # gamma_t nu = 2 / sqrt(t): the decay factor is negative for t < 4, zero at t = 4
        (Coordinate(8), 1.0, 2.0, "inv_sqrt", None),
        (ReLU(8), 0.1, 0.5, "constant", None),
        (Fourier(8, sigma=2.0), 0.5, 0.2, "inv", None),
        # fold the global scale into the coefficients every round
        (Coordinate(8), 0.3, 0.3, "constant", 2.0),
    ],
    ids=["coordinate", "negative-factor", "relu", "fourier-inv", "rescale"],
)
def test_doubly_sgd_equals_literal_loop(monkeypatch, fmap, eta, nu, schedule, rescale):
    """Same seed -> same draws; online losses and predictions on new points agree to 1e-10."""
    if rescale is not None:
        monkeypatch.setattr(doubly_sgd, "RESCALE_BELOW", rescale)
    d = clipped_gaussian(np.random.default_rng(3), D=8, T=40, n_val=1, n_test=25, sparsity=3)
    k = 3
    res = doubly_sgd.fit(
        d.X_train,
        d.y_train,
        fmap,
        np.random.default_rng(5),
        eta=eta,
        k=k,
        nu=nu,
        schedule=schedule,
    )
    W, alpha, losses = _literal_dsgd(
        d.X_train, d.y_train, fmap, np.random.default_rng(5), eta, k, nu, schedule
    )
    assert not res.diverged
    np.testing.assert_array_equal(res.predictor.W, W)
    np.testing.assert_allclose(res.losses, losses, rtol=1e-10, atol=1e-12)
    pred_literal = fmap.matrix(d.X_test, W) @ alpha
    np.testing.assert_allclose(
        res.predictor.predict(d.X_test), pred_literal, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(res.predictor.coef, alpha, rtol=1e-10, atol=1e-12)
    assert res.predictor.evals_per_point() == k * len(d.y_train)


def _literal_fixed_random(X, y, fmap, rng, eta, r, lam, schedule):
    etas = step_sizes(schedule, eta, len(y))
    W = fmap.sample(rng, r)
    beta = np.zeros(r)
    losses = []
    for t in range(len(y)):
        z = np.array([fmap.point(X[t], W[j : j + 1])[0] for j in range(r)]) / np.sqrt(r)
        yhat = float(beta @ z)
        losses.append(0.5 * (yhat - y[t]) ** 2)
        beta = beta - etas[t] * ((yhat - y[t]) * z + lam * beta)
    return W, beta, np.array(losses)


@pytest.mark.parametrize("lam", [0.0, 0.1])
def test_fixed_random_equals_literal_loop(lam):
    d = clipped_gaussian(np.random.default_rng(4), D=8, T=50, n_val=1, n_test=20, sparsity=3)
    fmap = ReLU(8)
    res = fixed_random.fit(
        d.X_train,
        d.y_train,
        fmap,
        np.random.default_rng(2),
        eta=0.05,
        r=30,
        lam=lam,
        schedule="inv_sqrt",
    )
    W, beta, losses = _literal_fixed_random(
        d.X_train, d.y_train, fmap, np.random.default_rng(2), 0.05, 30, lam, "inv_sqrt"
    )
    np.testing.assert_allclose(res.losses, losses, rtol=1e-10, atol=1e-12)
    pred = fmap.matrix(d.X_test, W) @ beta / np.sqrt(30)
    np.testing.assert_allclose(res.predictor.predict(d.X_test), pred, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block", [None, 7, 1])
@pytest.mark.parametrize("fmap", [Coordinate(6), Fourier(6, sigma=1.0)], ids=lambda f: f.name)
def test_kernel_ogd_equals_full_kernel_matrix_loop(monkeypatch, block, fmap):
    """alpha_t = eta_t (y_t - sum_{i<t} alpha_i K[i, t]) with the full kernel matrix; block sizes
    that do not divide T exercise the learner's blocked kernel rows."""
    if block is not None:
        monkeypatch.setattr(kernel_ogd, "BLOCK", block)
    d = clipped_gaussian(np.random.default_rng(6), D=6, T=45, n_val=1, n_test=1, sparsity=3)
    X, y = d.X_train, d.y_train
    K = fmap.kernel(X, X)
    etas = step_sizes("inv_sqrt", 0.7, len(y))
    alpha = np.zeros(len(y))
    losses = np.zeros(len(y))
    for t in range(len(y)):
        yhat = sum(alpha[i] * K[i, t] for i in range(t))
        losses[t] = 0.5 * (yhat - y[t]) ** 2
        alpha[t] = etas[t] * (y[t] - yhat)
    res = kernel_ogd.fit(X, y, fmap, None, eta=0.7, schedule="inv_sqrt")
    np.testing.assert_allclose(res.predictor.alpha, alpha, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(res.losses, losses, rtol=1e-10, atol=1e-13)
    assert res.counters["kernel_evals"] == len(y) * (len(y) - 1) // 2


def test_kernel_ogd_long_pass_crosses_default_block():
    """T > BLOCK (512): the second block of kernel rows is used correctly."""
    d = clipped_gaussian(np.random.default_rng(8), D=5, T=600, n_val=1, n_test=1, sparsity=3)
    X, y, fmap = d.X_train, d.y_train, Coordinate(5)
    K = fmap.kernel(X, X)
    alpha = np.zeros(len(y))
    for t in range(len(y)):
        alpha[t] = 0.5 * (y[t] - K[t, :t] @ alpha[:t])
    res = kernel_ogd.fit(X, y, fmap, None, eta=0.5)
    np.testing.assert_allclose(res.predictor.alpha, alpha, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# divergence


def test_is_divergent():
    assert not is_divergent(0.0) and not is_divergent(-DIVERGENCE_BOUND)
    assert is_divergent(DIVERGENCE_BOUND * 1.01)
    assert is_divergent(float("nan")) and is_divergent(float("inf"))


@pytest.mark.parametrize("method", ["doubly_sgd", "fixed_random", "kernel_ogd"])
def test_divergent_pass_stops_and_is_flagged(method):
    """A huge step size makes the pass blow up: it stops at the first prediction beyond the
    bound, and the losses end there."""
    d = _problem(D=10, T=200)
    hyper = {"eta": 50.0}
    if method == "doubly_sgd":
        hyper["k"] = 2
    if method == "fixed_random":
        hyper["r"] = 20
    res = LEARNERS[method].fit(
        d.X_train, d.y_train, Coordinate(10), np.random.default_rng(0), **hyper
    )
    assert res.diverged
    last_pred_err = np.sqrt(2 * res.losses[-1])
    assert last_pred_err > DIVERGENCE_BOUND - 1.0  # |yhat - y| with |y| <= 1
    assert len(res.losses) < len(d.y_train)
    if method == "doubly_sgd":  # the stored features are those of the completed rounds
        assert len(res.predictor.W) == 2 * (len(res.losses) - 1)
