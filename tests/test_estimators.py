"""The scikit-learn estimators (``ilnrun.estimators``): scikit-learn's own estimator checks, the
same numbers as the learners they wrap, the label transform, ``partial_fit`` and the README
example. (``tests/test_estimator.py`` is about Algorithm-2 estimates, not these.)"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from ilnrun.estimators import (
    DoublySGDRegressor,
    FixedRandomRegressor,
    KernelOGDRegressor,
    KernelRidgeRegressor,
    NystroemRidgeRegressor,
    ShrinkingGradientRegressor,
)
from ilnrun.features import Coordinate, build_feature_map
from ilnrun.learners import LEARNERS

README = Path(__file__).resolve().parent.parent / "README.md"

ESTIMATORS = [
    ShrinkingGradientRegressor(feature_map="coordinate"),
    DoublySGDRegressor(feature_map="coordinate"),
    FixedRandomRegressor(feature_map="coordinate"),
    KernelOGDRegressor(feature_map="coordinate"),
    ShrinkingGradientRegressor(m=20, feature_map="fourier", predict_mode="estimated", m_test=50),
    DoublySGDRegressor(k=4, eta=0.3, feature_map="fourier", schedule="inv_sqrt"),
    FixedRandomRegressor(r=50, feature_map="relu", eta=0.03, lam=0.01),
    KernelOGDRegressor(feature_map="relu", eta=0.03, center_y=False, scale_y=False),
    ShrinkingGradientRegressor(feature_map="fourier", preset="theory", c=0.01, B=1.0),
    KernelRidgeRegressor(feature_map="fourier", ridge=1e-2),
    NystroemRidgeRegressor(feature_map="relu", rank=30),
]


def _expected_failures(estimator) -> dict[str, str]:
    """Checks that cannot apply, with the reason."""
    if getattr(estimator, "predict_mode", "exact") == "estimated":
        reason = (
            "predict_mode='estimated' is Algorithm 2: every point gets m_test random draws taken "
            "in row order, so a point's prediction depends on the rows before it in X (random "
            "by design; the exact mode passes)"
        )
        return {
            "check_methods_sample_order_invariance": reason,
            "check_methods_subset_invariance": reason,
            # R^2 > 0.5 asked: Algorithm 2's variance is about |alpha|_1^2 / m_test a point, and
            # one pass over the check's 200 rows leaves |alpha|_1 near 15 (R^2 < 0 there even at
            # m_test = 2000, while the same fit predicted exactly passes)
            "check_regressors_train": "Algorithm-2 predictions are too noisy for R^2 > 0.5",
        }
    if getattr(estimator, "preset", None) == "theory":
        # Theorem 1's eta = B / sqrt(T) = 0.07 on the check's 200 rows: one pass at that step
        # size reaches R^2 = 0.2-0.4 there (a worst-case guarantee, not a tuned step)
        return {
            f"check_regressors_train{v}": "Theorem 1's step size is small at T = 200"
            for v in ("", "(readonly_memmap=True)", "(readonly_memmap=True,X_dtype=float32)")
        }
    return {}


# the checks also fit unscaled inputs, on which some default step sizes diverge (and warn)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _data(n: int = 60, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.tanh(X @ rng.standard_normal(d) / np.sqrt(d))
    return X, y


COORD = {"feature_map": "coordinate"}
LEARNER_CASES = [
    (
        ShrinkingGradientRegressor(m=30, eta=0.3, B=0.5, **COORD),
        "shrinking_gradient",
        {"m": 30, "B": 0.5},
    ),
    (DoublySGDRegressor(k=3, eta=0.3, nu=0.01, **COORD), "doubly_sgd", {"k": 3, "nu": 0.01}),
    (
        FixedRandomRegressor(r=40, eta=0.3, lam=0.01, **COORD),
        "fixed_random",
        {"r": 40, "lam": 0.01},
    ),
    (KernelOGDRegressor(eta=0.3, **COORD), "kernel_ogd", {}),
]


@pytest.mark.parametrize("feature_map", ["coordinate", "fourier"])
@pytest.mark.parametrize(("est", "learner", "kwargs"), LEARNER_CASES)
def test_estimator_is_the_learner(est, learner, kwargs, feature_map):
    """With the label transform off and ``random_state=s``, ``fit`` is the learner's ``fit`` with
    ``default_rng(s)``: the same online losses, counters and predictions, bit for bit."""
    X, y = _data()
    X_new = _data(seed=1)[0]
    est = clone(est).set_params(
        feature_map=feature_map, center_y=False, scale_y=False, random_state=5
    )
    est.fit(X, y)
    fmap = build_feature_map({"kind": feature_map, "sigma": "median"}, X)
    res = LEARNERS[learner].fit(
        X, y, fmap, np.random.default_rng(5), eta=0.3, schedule="constant", decay=1.0, **kwargs
    )
    np.testing.assert_array_equal(est.online_losses_, res.losses)
    assert est.train_evals_ == res.counters["train_evals"] > 0 or learner == "kernel_ogd"
    assert est.features_sampled_ == res.counters["features_sampled"]
    assert est.shrinks_ == res.counters["shrinks"]
    assert est.kernel_evals_ == res.counters["kernel_evals"]
    p = res.predictor
    want = (
        p.predict(X_new)
        if learner in ("doubly_sgd", "fixed_random")
        else p.predict_exact(fmap.kernel(X_new, X))
    )
    np.testing.assert_allclose(est.predict(X_new), want, rtol=1e-12, atol=1e-12)


def test_counters_are_the_documented_costs():
    X, y = _data(n=50)
    dsgd = DoublySGDRegressor(k=2, random_state=0, **COORD).fit(X, y)
    assert dsgd.train_evals_ == 2 * 50 * 51 // 2
    fr = FixedRandomRegressor(r=7, random_state=0, **COORD).fit(X, y)
    assert (fr.train_evals_, fr.features_sampled_) == (7 * 50, 7)
    ogd = KernelOGDRegressor(**COORD).fit(X, y)
    assert (ogd.kernel_evals_, ogd.train_evals_) == (50 * 49 // 2, 0)
    sg = ShrinkingGradientRegressor(m=10, random_state=0, **COORD).fit(X, y)
    assert sg.features_sampled_ == 10 * 49 and sg.train_evals_ == 2 * 10 * 49


@pytest.mark.parametrize("est", [c[0] for c in LEARNER_CASES])
def test_labels_centred_and_scaled_affine_equivariant(est):
    """The learner sees ``(y - mean) / max|y - mean|``: fitting ``a y + b`` (a > 0) gives
    ``a f + b`` and online losses times ``a^2``; without the transform it does not."""
    X, y = _data()
    a, b = 250.0, 150.0
    e1 = clone(est).set_params(random_state=1).fit(X, y)
    e2 = clone(est).set_params(random_state=1).fit(X, a * y + b)
    assert e2.y_mean_ == pytest.approx(a * e1.y_mean_ + b)
    assert e2.y_scale_ == pytest.approx(a * e1.y_scale_)
    np.testing.assert_allclose(e2.predict(X), a * e1.predict(X) + b, rtol=1e-9)
    np.testing.assert_allclose(e2.online_losses_, a**2 * e1.online_losses_, rtol=1e-9)
    raw = clone(est).set_params(random_state=1, center_y=False, scale_y=False)
    raw.fit(X, a * y + b)  # labels in the hundreds, handed over as they are: a poor fit
    assert e2.score(X, a * y + b) > raw.score(X, a * y + b) + 0.3


@pytest.mark.parametrize("est", [c[0] for c in LEARNER_CASES])
def test_partial_fit_equals_fit_on_the_stream(est):
    """``partial_fit`` in batches equals ``fit`` on all rows seen, in order, same random_state."""
    X, y = _data(n=45)
    whole = clone(est).set_params(random_state=3).fit(X, y)
    stream = clone(est).set_params(random_state=3)
    for a, b in ((0, 10), (10, 11), (11, 45)):
        stream.partial_fit(X[a:b], y[a:b])
    np.testing.assert_array_equal(stream.online_losses_, whole.online_losses_)
    np.testing.assert_array_equal(stream.predict(X), whole.predict(X))
    assert stream.train_evals_ == whole.train_evals_
    # fit starts over: a partial_fit after it continues from the fit's rows
    stream.fit(X[:10], y[:10]).partial_fit(X[10:], y[10:])
    np.testing.assert_array_equal(stream.predict(X), whole.predict(X))


def test_estimated_predictions_approach_exact_ones():
    """Algorithm-2 predictions: seeded (the same call, the same draws), and their error shrinks
    like ``1 / sqrt(m_test)`` towards the exact kernel prediction."""
    X, y = _data(n=80)
    sg = ShrinkingGradientRegressor(m=50, eta=0.3, random_state=0, **COORD).fit(X, y)
    exact = sg.predict(X[:20])
    sg.set_params(predict_mode="estimated", m_test=100)
    coarse = np.max(np.abs(sg.predict(X[:20]) - exact))
    fine = sg.set_params(m_test=20000).predict(X[:20])
    np.testing.assert_array_equal(fine, sg.predict(X[:20]))
    assert np.max(np.abs(fine - exact)) < min(coarse / 4, 0.3 * np.max(np.abs(exact)))


def test_averaged_predictor_differs_from_final():
    X, y = _data(n=80)
    final = ShrinkingGradientRegressor(m=30, eta=0.5, random_state=0, **COORD).fit(X, y)
    avg = ShrinkingGradientRegressor(m=30, eta=0.5, average=True, random_state=0, **COORD)
    avg.fit(X, y)
    np.testing.assert_array_equal(final.online_losses_, avg.online_losses_)
    assert not np.allclose(final.predict(X), avg.predict(X))


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"m": 0}, "m"),
        ({"eta": -1.0}, "eta"),
        ({"schedule": "cosine"}, "schedule"),
        ({"feature_map": "rbf"}, "feature_map"),
        ({"sigma": "mean"}, "sigma"),
        ({"sigma": 0.0}, "sigma"),
        ({"predict_mode": "approx"}, "predict_mode"),
        ({"random_state": "seed"}, "random_state"),
    ],
)
def test_bad_parameters_raise_in_fit_naming_them(params, name):
    X, y = _data(n=10)
    est = ShrinkingGradientRegressor(**{**COORD, **params})  # __init__ only stores
    with pytest.raises(ValueError, match=f"'{name}' parameter"):
        est.fit(X, y)


def test_degenerate_median_bandwidth_falls_back_to_one():
    X = np.ones((5, 3))  # all rows equal: the median distance is 0
    est = FixedRandomRegressor(r=5, feature_map="fourier", random_state=0).fit(X, np.arange(5.0))
    assert est.feature_map_.sigma == 1.0
    sg = ShrinkingGradientRegressor(**COORD).fit(X, np.ones(5))
    assert isinstance(sg.feature_map_, Coordinate)


def _readme_example() -> str:
    text = README.read_text()
    m = re.search(r"<!-- tested: estimator example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README.md lost its tested estimator example"
    return m.group(1)


def test_readme_estimator_example_runs(capsys):
    """The README's GridSearchCV example on scikit-learn's diabetes data runs as printed."""
    namespace: dict = {}
    exec(compile(_readme_example(), str(README), "exec"), namespace)  # noqa: S102
    search, krr = namespace["search"], namespace["krr"]
    # measured: eta = 0.03, R^2 = 0.35 (one pass, fourier); kernel ridge 0.50 (a linear model
    # gets about 0.48)
    assert search.best_params_["shrinkinggradientregressor__eta"] in (0.01, 0.03)
    assert search.best_score_ > 0.25  # cross-validated R^2
    assert krr.best_score_ > search.best_score_ + 0.05  # the batch fit is better
    assert "feature evaluations" in capsys.readouterr().out
