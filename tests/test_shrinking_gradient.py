"""Shrinking Gradient (ILN paper Algorithms 1-2): shrink rule, the sign erratum, agreement with
kernel OGD for large m, the averaged predictor and the rescaling of the global scale."""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.datasets import clipped_gaussian
from ilnrun.features import Coordinate
from ilnrun.learners import kernel_ogd, shrinking_gradient
from ilnrun.schedules import step_sizes

# ----------------------------------------------------------------------------------------------
# Deterministic traces. If every coordinate of every x equals the same c, then
# psi(x_i; w) psi(x_t; w) = c^2 for every w, and as long as all stored alphas are >= 0 the
# estimate E = |alpha|_1 / m * sum_k sgn(alpha_{i_k}) c^2 = c^2 sum_i alpha_i is exact and
# deterministic. Keeping 16 B <= min(y) with y > 0 guarantees alpha >= 0: a descent step only
# happens when E < 16 B <= y_t, so alpha_t = eta_t (y_t - E) > 0.


def _literal(X, y, eta, B, schedule="constant"):
    """Algorithm 1 written out literally for the deterministic setting above (E computed with
    the exact kernel): returns final alpha, the alphas f_1..f_T used at each round, shrinks and
    the online losses."""
    T = len(y)
    etas = step_sizes(schedule, eta, T)
    K = Coordinate(X.shape[1]).kernel(X, X)
    alpha = np.zeros(T)
    history, losses, shrinks = [], [], 0
    for t in range(T):
        history.append(alpha.copy())  # f_t, the predictor used at round t
        E = float(alpha[:t] @ K[:t, t])
        losses.append(0.5 * (E - y[t]) ** 2)
        if abs(E) < 16 * B:
            alpha[t] = etas[t] * (y[t] - E)
        else:
            alpha[:t] /= 4.0
            shrinks += 1
    return alpha, np.array(history), shrinks, np.array(losses)


@pytest.mark.parametrize("B", [1 / 32, 1 / 16], ids=["E above 16B", "E equal to 16B"])
def test_shrink_fires_and_divides_alpha_by_four_hand_trace(B):
    """x = (1, 1, 1) for all t, y = 1, eta = 1, so k = 1 and E_t = sum alpha. With 16 B = 0.5
    (or exactly 1.0: |E| >= 16 B shrinks, the rule is strict '<' for a step):
      t=1: E=0 -> alpha_1 = 1            t=2: E=1 -> shrink, alpha = (1/4)
      t=3: E=1/4 -> alpha_3 = 3/4         t=4: E=1 -> shrink, alpha = (1/16, 0, 3/16)
      t=5: E=1/4 -> alpha_5 = 3/4         t=6: E=1 -> shrink, alpha = (1/64, 0, 3/64, 0, 3/16)
    Averaged predictor (1/6) sum_{t=1..6} f_t with f_1 = 0, f_2 = (1), f_3 = (1/4),
    f_4 = (1/4, 0, 3/4), f_5 = (1/16, 0, 3/16), f_6 = (1/16, 0, 3/16, 0, 3/4)."""
    X, y = np.ones((6, 3)), np.ones(6)
    res = shrinking_gradient.fit(X, y, Coordinate(3), np.random.default_rng(0), eta=1.0, m=4, B=B)
    assert res.counters["shrinks"] == 3
    assert not res.diverged
    np.testing.assert_allclose(
        res.predictor.alpha, [1 / 64, 0, 3 / 64, 0, 3 / 16, 0], rtol=1e-12, atol=0
    )
    np.testing.assert_allclose(
        res.losses, [0.5, 0, 0.5 * 0.75**2, 0, 0.5 * 0.75**2, 0], rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(
        res.averaged.alpha, np.array([1.625, 0, 1.125, 0, 0.75, 0]) / 6, rtol=1e-12, atol=0
    )


def test_no_shrink_just_below_threshold():
    """Contrast: with 16 B slightly above E_2 = 1 the step is taken (alpha_2 = 1 - 1 = 0) and
    nothing ever shrinks."""
    X, y = np.ones((6, 3)), np.ones(6)
    res = shrinking_gradient.fit(
        X, y, Coordinate(3), np.random.default_rng(0), eta=1.0, m=4, B=1.001 / 16
    )
    assert res.counters["shrinks"] == 0
    np.testing.assert_allclose(res.predictor.alpha, [1, 0, 0, 0, 0, 0], atol=1e-15)


def _deterministic_problem(T=40, seed=0, c=0.9, D=4):
    y = np.random.default_rng(seed).uniform(0.5, 1.0, size=T)
    return np.full((T, D), c), y, Coordinate(D)


@pytest.mark.parametrize(
    "schedule,eta,B",
    [("constant", 0.8, 1 / 32), ("inv_sqrt", 1.5, 1 / 40), ("constant", 0.8, 1 / 320)],
    ids=["few shrinks", "inv_sqrt", "26 shrinks"],
)
def test_matches_literal_trace_with_shrinks_and_averaging(schedule, eta, B):
    """Final alpha, averaged alpha = (1/T) sum_{t=1..T} f_t (brute force over the recorded
    f_t), the shrink count and the online losses equal the literal algorithm. The last case
    shrinks 26 times in 40 rounds (global scale 4^-26 ~ 2e-16), without reaching the default
    rescaling threshold."""
    X, y, fmap = _deterministic_problem()
    alpha, history, shrinks, losses = _literal(X, y, eta, B, schedule)
    assert shrinks >= 5
    res = shrinking_gradient.fit(
        X, y, fmap, np.random.default_rng(1), eta=eta, m=3, B=B, schedule=schedule
    )
    assert res.counters["shrinks"] == shrinks
    np.testing.assert_allclose(res.predictor.alpha, alpha, rtol=1e-10, atol=0)
    np.testing.assert_allclose(res.averaged.alpha, history.mean(axis=0), rtol=1e-10, atol=0)
    np.testing.assert_allclose(res.losses, losses, rtol=1e-10, atol=1e-15)


def _averaged_from_final(res, T):
    """Brute-force (1/T) sum_{t=1..T} f_t reconstructed from a pass's output: a round t >= 2 with
    alpha_t = 0 is a shrink (a step gives alpha_t = eta (y_t - E_t) != 0 almost surely), so
    f_t's coefficient i < t equals final alpha_i * 4^(number of shrinks in rounds t..T)."""
    a = res.predictor.alpha
    shrink = (a == 0.0) & (np.arange(T) > 0)
    assert shrink.sum() == res.counters["shrinks"]
    later = np.cumsum(shrink[::-1])[::-1]  # later[t] = shrinks in rounds t..T (0-based t)
    fbar = np.zeros(T)
    for t in range(T):
        fbar[:t] += a[:t] * 4.0 ** later[t]
    return fbar / T


def _many_shrinks_run(rescale_below=None, monkeypatch=None):
    d = clipped_gaussian(np.random.default_rng(1), D=20, T=600, n_val=1, n_test=1, sparsity=5)
    X, y, fmap = d.X_train, d.y_train, Coordinate(20)
    if rescale_below is not None:
        monkeypatch.setattr(shrinking_gradient, "RESCALE_BELOW", rescale_below)
    res = shrinking_gradient.fit(X, y, fmap, np.random.default_rng(0), eta=0.5, m=20, B=0.0005)
    assert res.counters["shrinks"] > 260  # > 250: the default threshold 1e-150 is crossed
    return res


@pytest.mark.parametrize("rescale_below", [0.5, 2.0])
def test_rescaling_path_gives_the_same_predictors(monkeypatch, rescale_below):
    """Random data, small B: many shrinks (> 250, so the default threshold 1e-150 fires once).
    Folding the global scale into the coefficients after every shrink (RESCALE_BELOW = 0.5) or
    after every round (2.0) gives the same counters, losses, final and averaged alphas as the
    default, to relative 1e-9."""
    ref = _many_shrinks_run()
    res = _many_shrinks_run(rescale_below, monkeypatch)
    assert res.counters == ref.counters
    np.testing.assert_allclose(res.predictor.alpha, ref.predictor.alpha, rtol=1e-9, atol=0)
    np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(res.averaged.alpha, ref.averaged.alpha, rtol=1e-9, atol=0)


@pytest.mark.parametrize("rescale_below", [None, 0.5, 2.0], ids=["default", "0.5", "2.0"])
def test_averaged_predictor_matches_brute_force_after_many_shrinks(monkeypatch, rescale_below):
    """The averaged alpha equals (1/T) sum_t f_t reconstructed by brute force from the final
    alpha and the shrink rounds (relative 1e-9), whatever the rescaling threshold."""
    res = _many_shrinks_run(rescale_below, monkeypatch)
    fbar = _averaged_from_final(res, len(res.losses))
    np.testing.assert_allclose(res.averaged.alpha, fbar, rtol=1e-9, atol=0)


@pytest.mark.parametrize("rescale_below", [None, 0.5], ids=["default", "0.5"])
def test_rescaling_on_the_deterministic_trace(monkeypatch, rescale_below):
    """The literal trace with ~2 shrinks per 3 rounds over 600 rounds (s would reach 4^-400,
    far below the default 1e-150): final and averaged alpha as in the literal algorithm."""
    X, y, fmap = _deterministic_problem(T=600, seed=3)
    alpha, history, shrinks, _ = _literal(X, y, 0.8, 1 / 320)
    assert shrinks > 300
    if rescale_below is not None:
        monkeypatch.setattr(shrinking_gradient, "RESCALE_BELOW", rescale_below)
    res = shrinking_gradient.fit(X, y, fmap, np.random.default_rng(0), eta=0.8, m=2, B=1 / 320)
    assert res.counters["shrinks"] == shrinks
    np.testing.assert_allclose(res.predictor.alpha, alpha, rtol=1e-9, atol=0)
    np.testing.assert_allclose(res.averaged.alpha, history.mean(axis=0), rtol=1e-9, atol=0)


# ----------------------------------------------------------------------------------------------
# the erratum


def _erratum_problem():
    d = clipped_gaussian(np.random.default_rng(0), D=20, T=200, n_val=10, n_test=300, sparsity=5)
    return d, Coordinate(20)


def test_descent_sign_learns():
    """Default (descent, alpha_t = eta (y_t - E_t)), B huge so no shrink: the online loss of the
    second half is below the first half's and the exact test loss is far below the zero
    predictor's."""
    d, fmap = _erratum_problem()
    res = shrinking_gradient.fit(
        d.X_train, d.y_train, fmap, np.random.default_rng(1), eta=0.3, m=1000, B=1e6
    )
    assert not res.diverged and res.counters["shrinks"] == 0
    L = res.losses
    assert L[100:].mean() < 0.7 * L[:100].mean()
    test_loss = 0.5 * np.mean(
        (res.predictor.predict_exact(fmap.kernel(d.X_test, d.X_train)) - d.y_test) ** 2
    )
    zero_loss = 0.5 * np.mean(d.y_test**2)
    assert test_loss < 0.25 * zero_loss
    # the averaged predictor also beats the zero predictor
    avg_loss = 0.5 * np.mean(
        (res.averaged.predict_exact(fmap.kernel(d.X_test, d.X_train)) - d.y_test) ** 2
    )
    assert avg_loss < 0.5 * zero_loss


def test_printed_sign_diverges():
    """The paper's printed rule alpha_t = -eta (y_t - E_t) is gradient ascent: on the same
    problem (same eta, m, B so large that 16 B exceeds the divergence bound and no shrink can
    rescue it) the pass diverges or its losses blow up."""
    d, fmap = _erratum_problem()
    res = shrinking_gradient.fit(
        d.X_train,
        d.y_train,
        fmap,
        np.random.default_rng(1),
        eta=0.3,
        m=1000,
        B=1e6,
        printed_sign=True,
    )
    assert res.counters["shrinks"] == 0
    assert res.diverged or res.losses.max() > 1e3
    assert res.losses[len(res.losses) // 2 :].mean() > 1e3 * res.losses[:10].mean()


def test_printed_sign_is_the_negated_step():
    """On the deterministic trace the printed rule's first coefficient is -eta y_1."""
    X, y = np.ones((2, 3)), np.array([0.5, 0.2])
    res = shrinking_gradient.fit(
        X, y, Coordinate(3), np.random.default_rng(0), eta=0.4, m=2, B=10, printed_sign=True
    )
    # alpha_1 = -0.4 * 0.5 = -0.2; E_2 = -0.2; alpha_2 = -0.4 (0.2 - (-0.2)) = -0.16
    np.testing.assert_allclose(res.predictor.alpha, [-0.2, -0.16], rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# large m: Shrinking Gradient tracks kernel OGD


def test_large_m_tracks_kernel_ogd():
    """With |psi| <= 1 (inputs scaled into [0, 1]) Lemma 4/5 of the paper bound the variance of
    one Algorithm-2 estimate given the past by |alpha|_1^2 / m.

    Per round: E_t - sum_{i<t} alpha_i k(x_i, x_t) (SG's own alpha) is a mean of m iid bounded
    terms, nearly Gaussian; we allow 5 * |alpha^{(t)}|_1 / sqrt(m) (5 standard deviations of the
    bound).

    Final coefficients: without shrinks alpha = eta L^{-1}(y - eps) with L = I + diag(eta) K_<
    (K_< the strictly lower kernel triangle) and eps the estimation errors, while kernel OGD has
    alpha* = eta L^{-1} y. So alpha - alpha* = -L^{-1} diag(eta) eps; the eps_t are martingale
    differences (uncorrelated), so Var(delta_j) <= sum_t (L^{-1})_{jt}^2 eta_t^2 |alpha^{(t)}|_1^2
    / m. We allow 5 of these standard deviations (|alpha^{(t)}|_1 from the pass itself)."""
    T, D, m, eta = 12, 10, 200_000, 1.0
    d = clipped_gaussian(np.random.default_rng(4), D=D, T=T, n_val=1, n_test=1, sparsity=3)
    X = d.X_train / d.X_train.max()
    y = d.y_train
    fmap = Coordinate(D)
    K = fmap.kernel(X, X)
    oracle = kernel_ogd.fit(X, y, fmap, None, eta=eta)
    res = shrinking_gradient.fit(X, y, fmap, np.random.default_rng(9), eta=eta, m=m, B=1e6)
    assert res.counters["shrinks"] == 0 and not res.diverged
    alpha, star = res.predictor.alpha, oracle.predictor.alpha

    E = y - alpha / eta
    l1 = np.array([np.abs(alpha[:t]).sum() for t in range(T)])  # |alpha^{(t)}|_1
    exact_given_own_alpha = np.array([alpha[:t] @ K[:t, t] for t in range(T)])
    assert np.all(np.abs(E - exact_given_own_alpha) <= 5 * l1 / np.sqrt(m) + 1e-15)

    L = np.eye(T) + eta * np.tril(K, k=-1)
    Linv = np.linalg.inv(L)
    sd = np.sqrt((Linv**2 * (eta**2 * l1**2 / m)[None, :]).sum(axis=1))
    assert np.all(np.abs(alpha - star) <= 5 * sd + 1e-15), np.abs(alpha - star) / sd
    # the check has power: the allowed deviation is small against the coefficients themselves
    assert np.max(5 * sd) < 0.1 * np.max(np.abs(star))
