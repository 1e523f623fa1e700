"""Algorithm 2 (EST_SCALAR_PROD): unbiased, with the variance of its iid definition; and the
estimate made inside Shrinking Gradient (iid and systematic sampling of i)."""

from __future__ import annotations

import numpy as np
import pytest

from ilnrun.features import Coordinate, Fourier, ReLU
from ilnrun.learners import kernel_ogd, shrinking_gradient
from ilnrun.learners.base import KernelExpansion

ALPHA = np.array([0.7, -0.3, 0.0, 1.2, 0.0, -0.05])  # mixed signs, some zeros


def _sample_var_se(v: np.ndarray) -> float:
    """Standard error of the sample variance of ``v``, from the draws: the variance of s^2 is
    approximately (mu_4 - sigma^4) / n with mu_4 the fourth central moment."""
    c = v - v.mean()
    return float(np.sqrt(max(np.mean(c**4) - np.mean(c**2) ** 2, 0.0) / len(v)))


def _problem(fmap, seed: int = 0):
    rng = np.random.default_rng(seed)
    X_train = np.abs(rng.standard_normal((len(ALPHA), fmap.d)))
    X_eval = np.abs(rng.standard_normal((3, fmap.d)))
    return X_train, X_eval


@pytest.mark.parametrize(
    "fmap", [Coordinate(8), ReLU(5), Fourier(5, sigma=1.5)], ids=lambda f: f.name
)
def test_predict_estimated_is_unbiased(fmap):
    """Mean of R independent estimates (m = 3 samples each) for 3 points is within 4 standard
    errors of the exact sum_i alpha_i k(x_i, x); the standard error is computed from the draws
    themselves (sample std / sqrt(R))."""
    R, m = 4000, 3
    X_train, X_eval = _problem(fmap)
    f = KernelExpansion(ALPHA)
    exact = f.predict_exact(fmap.kernel(X_eval, X_train))
    # every repeated row gets its own m draws; a small chunk_pairs exercises the chunked loop
    X_rep = np.repeat(X_eval, R, axis=0)
    est = f.predict_estimated(X_train, X_rep, fmap, m, np.random.default_rng(1), chunk_pairs=999)
    est = est.reshape(len(X_eval), R)
    for p in range(len(X_eval)):
        se = est[p].std(ddof=1) / np.sqrt(R)
        assert abs(est[p].mean() - exact[p]) <= 4 * se, (p, est[p].mean(), exact[p], se)
        # power: 4 standard errors are small against the scale of the terms (|alpha|_1 k)
        assert 4 * se < 0.25 * np.abs(ALPHA).sum() * np.sqrt(
            fmap.kernel(X_eval[p : p + 1], X_eval[p : p + 1])[0, 0]
            * np.max(np.diag(fmap.kernel(X_train, X_train)))
        )


def test_predict_estimated_has_algorithm2_variance():
    """For the coordinate map the variance of one estimate is known in closed form:
    Var E = (|alpha|_1^2 sum_i q_i E_w[psi(x_i;w)^2 psi(x;w)^2] - f(x)^2) / m,
    q_i = |alpha_i| / |alpha|_1 (Algorithm 2's iid draws of (i, w)). The sample variance of R
    estimates must be within 4 standard errors of it, the standard error of the sample variance
    computed from the draws (fourth central moment). A wrong q (e.g. uniform i) would change the
    variance, not the mean."""
    R, m = 6000, 4
    fmap = Coordinate(8)
    X_train, X_eval = _problem(fmap, seed=3)
    f = KernelExpansion(ALPHA)
    exact = f.predict_exact(fmap.kernel(X_eval, X_train))
    l1 = np.abs(ALPHA).sum()
    q = np.abs(ALPHA) / l1
    est = f.predict_estimated(
        X_train, np.repeat(X_eval, R, axis=0), fmap, m, np.random.default_rng(5)
    ).reshape(len(X_eval), R)
    for p in range(len(X_eval)):
        second = np.sum(q[:, None] * X_train**2 * X_eval[p] ** 2) / fmap.d  # E[(g)^2]
        var_theory = (l1**2 * second - exact[p] ** 2) / m
        var_hat = est[p].var(ddof=1)
        assert abs(var_hat - var_theory) <= 4 * _sample_var_se(est[p]), (p, var_hat, var_theory)


def test_zero_alpha_gives_exactly_zero():
    fmap = Coordinate(4)
    X_train = np.ones((5, 4))
    X_eval = np.arange(12.0).reshape(3, 4)
    out = KernelExpansion(np.zeros(5)).predict_estimated(
        X_train, X_eval, fmap, 7, np.random.default_rng(0)
    )
    assert out.shape == (3,)
    assert np.all(out == 0.0)


def test_single_coefficient_with_constant_products_is_exact():
    """With one nonzero alpha_i and inputs whose coordinates are all equal, every sampled term
    equals sgn(alpha_i) c_i c, so the estimate is exact (no randomness left)."""
    fmap = Coordinate(6)
    X_train = np.array([[2.0] * 6, [0.5] * 6])
    X_eval = np.array([[3.0] * 6, [-1.0] * 6])
    out = KernelExpansion(np.array([0.0, -0.4])).predict_estimated(
        X_train, X_eval, fmap, 5, np.random.default_rng(0)
    )
    np.testing.assert_allclose(out, [-0.4 * 0.5 * 3.0, -0.4 * 0.5 * -1.0], rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# the estimate inside Shrinking Gradient


def _online_predictions(res, y, eta):
    """Shrinking Gradient's online predictions E_t recovered from its coefficients: without a
    shrink (B large) alpha_t = eta (y_t - E_t) exactly, so E_t = y_t - alpha_t / eta."""
    return y - res.predictor.alpha / eta


@pytest.mark.parametrize("sampler", ["iid", "systematic"])
def test_online_predictions_are_unbiased_for_kernel_ogd(sampler):
    """Without shrinks the update alpha_t = eta (y_t - E_t) is linear in E_t and E_t is unbiased
    given the past, so by induction E[E_t] equals kernel OGD's exact online prediction at every
    round (round 2 is a single stored coefficient; rounds 3, 4 sample i from mixed-sign alphas).
    The mean over N independent passes is within 4 standard errors of it, the standard error
    computed from the draws themselves (sample std / sqrt(N))."""
    N, T, eta, m = 3000, 4, 0.5, 4
    X = np.abs(np.random.default_rng(2).standard_normal((T, 6)))
    y = np.array([0.9, -0.6, 0.4, -0.2])
    fmap = Coordinate(6)
    oracle = kernel_ogd.fit(X, y, fmap, None, eta=eta)
    yhat = y - oracle.predictor.alpha / eta
    E = np.empty((N, T))
    for s in range(N):
        res = shrinking_gradient.fit(
            X, y, fmap, np.random.default_rng(s), eta=eta, m=m, B=1e6, sampler=sampler
        )
        assert res.counters["shrinks"] == 0
        E[s] = _online_predictions(res, y, eta)
    assert np.all(np.abs(E[:, 0]) < 1e-12)  # round 1: alpha = 0 -> E = 0
    # alpha_1 = eta y_1 > 0 and alpha_2 = eta (y_2 - E_2) < 0 (E_2 >= 0 as x >= 0): the stored
    # coefficients have mixed signs from round 3 on
    assert np.all(y[1] - E[:, 1] < 0)
    for t in range(1, T):
        se = E[:, t].std(ddof=1) / np.sqrt(N)
        assert se > 0
        assert abs(E[:, t].mean() - yhat[t]) <= 4 * se, (t, E[:, t].mean(), yhat[t], se)
    # the online losses are consistent with these predictions
    res = shrinking_gradient.fit(X, y, fmap, np.random.default_rng(0), eta=eta, m=m, B=1e6)
    np.testing.assert_allclose(res.losses, 0.5 * (_online_predictions(res, y, eta) - y) ** 2)


def _fixed_alpha_problem():
    """Rounds 1 and 2 are deterministic: x_1, x_2 have all coordinates equal (c_1, c_2), so
    psi(x_1; w) psi(x_2; w) = c_1 c_2 for every w and E_2 = alpha_1 c_1 c_2 exactly. Then
    alpha = (eta y_1, eta (y_2 - E_2)) = (0.5, -0.7) has mixed signs, and round 3 estimates
    sum_i alpha_i k(x_i, x_3) with randomness in both i and w."""
    D = 6
    x3 = 1.0 + 0.3 * np.random.default_rng(0).standard_normal(D)
    X = np.vstack([np.full(D, 1.0), np.full(D, 0.8), x3])
    y = np.array([1.0, -1.0, 0.3])
    return X, y, Coordinate(D), 0.5


def _round3_estimates(sampler: str, N: int, m: int) -> np.ndarray:
    X, y, fmap, eta = _fixed_alpha_problem()
    out = np.empty(N)
    for s in range(N):
        res = shrinking_gradient.fit(
            X, y, fmap, np.random.default_rng(10_000 + s), eta=eta, m=m, B=1e6, sampler=sampler
        )
        alpha = res.predictor.alpha
        assert alpha[:2] == pytest.approx([0.5, -0.7], rel=1e-12)
        out[s] = y[2] - alpha[2] / eta
    return out


def test_systematic_sampler_is_unbiased_and_not_noisier_than_iid():
    """Both samplers: the mean of N round-3 estimates for the same fixed alpha is within 4
    standard errors (sample std / sqrt(N), from the draws) of the exact value.

    Variance: the iid sample variance matches Algorithm 2's closed form (within 4 standard errors
    of a sample variance, computed from the fourth central moment). Systematic sampling of i
    (one uniform U, points (k + U) / m) samples each stratum of width 1/m once, so the m points
    together are still an unbiased sample of q, and here the count of each stored index is
    floor/ceil(m q_i), removing the i-part of the variance. We require
    var_sys <= var_iid + 4 sqrt(se_sys^2 + se_iid^2), the two sample variances being independent,
    so the check only fails if systematic sampling is noisier beyond sampling error."""
    N, m = 3000, 5
    X, y, fmap, eta = _fixed_alpha_problem()
    alpha = np.array([0.5, -0.7])
    K = fmap.kernel(X[2:3], X[:2])[0]
    exact = float(alpha @ K)
    iid = _round3_estimates("iid", N, m)
    sys_ = _round3_estimates("systematic", N, m)
    for v in (iid, sys_):
        se = v.std(ddof=1) / np.sqrt(N)
        assert abs(v.mean() - exact) <= 4 * se, (v.mean(), exact, se)

    l1 = np.abs(alpha).sum()
    q = np.abs(alpha) / l1
    c = X[:2, 0]  # the constant coordinates of x_1, x_2
    second = np.sum(q * c**2) * np.mean(X[2] ** 2)  # E_{i,w}[(psi(x_i;w) psi(x_3;w))^2]
    var_iid_theory = (l1**2 * second - exact**2) / m
    v_iid, v_sys = iid.var(ddof=1), sys_.var(ddof=1)
    se_iid, se_sys = _sample_var_se(iid), _sample_var_se(sys_)
    assert abs(v_iid - var_iid_theory) <= 4 * se_iid, (v_iid, var_iid_theory)
    assert v_sys <= v_iid + 4 * np.hypot(se_iid, se_sys), (v_sys, v_iid)
