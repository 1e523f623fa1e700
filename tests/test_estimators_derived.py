"""Estimators derived from the learner specs (``ilnrun.estimators``): parameter parity over the
registry, a learner and a feature map registered later, the feature-map default and its warning,
a command-line cell reproduced from Python, and the refusals."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import toy_learner
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

import ilnrun.estimators as E
from ilnrun import config as C
from ilnrun.cell import instance, run_cell
from ilnrun.config.grid import seed_sequence
from ilnrun.datasets import DATASETS
from ilnrun.features import FEATURE_MAPS, Fourier, build_feature_map
from ilnrun.learners import LEARNERS
from ilnrun.losses import DEFAULT_LOSS
from ilnrun.params import Param, check_value

KERNEL_MAP = next(n for n, m in FEATURE_MAPS.items() if m.has_kernel)
FIRST_DATASET = next(n for n, d in DATASETS.items() if not d.needs_kernel)


def _data(n: int = 50, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.tanh(X @ rng.standard_normal(d) / np.sqrt(d))


def _expected_parameters(spec) -> dict:
    """What an estimator of ``spec`` must take, with its defaults, from the declarations only."""
    out = {spec.budget.name: spec.budget.default} if spec.budget is not None else {}
    out.update({p.name: spec.estimator_defaults.get(p.name, p.default) for p in spec.params})
    for cls in FEATURE_MAPS.values():
        for p in cls.params:
            out.setdefault(p.name, p.default)
    out.update({n: d for n, (d, _) in E.COMMON.items()})
    return out


@pytest.fixture
def toy(monkeypatch):
    """The toy learner registered with one line (as tests/test_architecture.py does)."""
    monkeypatch.setitem(LEARNERS, toy_learner.SPEC.name, toy_learner.SPEC)
    return toy_learner.SPEC


@pytest.mark.parametrize("name", [*LEARNERS, "toy_avg"])
def test_estimator_parameters_equal_the_spec(name, toy):
    """Parity over the registry (the toy learner included): an estimator's parameters and
    defaults are exactly its spec's, its budget size, the maps' and the common ones."""
    spec = LEARNERS[name]
    cls = E.estimator_class(name)
    assert cls().get_params(deep=False) == _expected_parameters(spec)
    sig = inspect.signature(cls.__init__).parameters
    assert all(p.kind is not p.VAR_KEYWORD for p in sig.values())  # explicit, as sklearn needs
    if spec.budget is not None:  # the budget size is the one positional parameter
        assert list(sig)[1] == spec.budget.name
        assert sig[spec.budget.name].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def test_public_classes_are_the_derived_ones():
    """The classes of the built-in learners are the factory's, under their historic names (a
    hand-written class would not be)."""
    names = {
        "ShrinkingGradientRegressor": "shrinking_gradient",
        "DoublySGDRegressor": "doubly_sgd",
        "FixedRandomRegressor": "fixed_random",
        "KernelOGDRegressor": "kernel_ogd",
        "KernelRidgeRegressor": "kernel_ridge",
        "NystroemRidgeRegressor": "nystroem_ridge",
    }
    for cls_name, learner in names.items():
        cls = getattr(E, cls_name)
        assert E.estimator_class(learner) is cls and cls.__name__ == cls_name
        assert cls._spec is LEARNERS[learner]
    assert {"preset", "c"} <= set(E.ShrinkingGradientRegressor().get_params())


def test_a_parameter_added_to_a_spec_appears_in_its_estimator(monkeypatch):
    """The declaration is the only one: a new Param in a spec is an estimator parameter."""
    import dataclasses

    spec = LEARNERS["fixed_random"]
    extra = Param("gamma0", "float", 2.5, "a new knob", min=0, key_omit=2.5)
    changed = dataclasses.replace(spec, params=(*spec.params, extra))
    monkeypatch.setitem(LEARNERS, spec.name, changed)
    cls = E.estimator_class(spec.name)
    assert cls().get_params()["gamma0"] == 2.5
    with pytest.raises(ValueError, match="'gamma0' parameter"):
        cls(gamma0=-1.0, feature_map=KERNEL_MAP).fit(*_data())
    monkeypatch.setitem(LEARNERS, spec.name, spec)
    assert E.estimator_class(spec.name) is E.FixedRandomRegressor


def test_the_toy_learner_gets_an_estimator(toy):
    """A learner registered later gets an estimator with no edit: the same numbers as its own
    fit, clone / set_params / GridSearchCV over its own parameter, a module attribute."""
    X, y = _data()
    cls = E.ToyAvgRegressor
    assert cls is E.estimator_class(toy.name)
    est = cls(7, eta=0.3, tail=0.25, feature_map="relu", center_y=False, scale_y=False)
    est.set_params(random_state=4).fit(X, y)
    fmap = build_feature_map({"kind": "relu"}, X)
    res = toy.fit(
        X, y, fmap, np.random.default_rng(4), eta=0.3, q=7, tail=0.25, schedule="constant"
    )
    np.testing.assert_array_equal(est.online_losses_, res.losses)
    np.testing.assert_array_equal(est.predict(X), res.predictor.predict(X))
    assert est.train_evals_ == 7 * len(y) and est.fit_arguments_["q"] == 7
    search = GridSearchCV(clone(est), {"tail": [0.25, 0.75]}, cv=3).fit(X, y)
    assert search.best_params_["tail"] in (0.25, 0.75)


def test_a_feature_map_registered_later(monkeypatch):
    """A new map's parameter: refused with a clear message by a class built before it, taken as
    an estimator parameter by the class built again."""

    taken = {p.name for c in FEATURE_MAPS.values() for p in c.params}
    assert "scaled_gain" not in taken  # a parameter no registered map has (a toy map has gain)

    class Scaled(Fourier):
        name = "scaled_rbf"
        params = (*Fourier.params, Param("scaled_gain", "float", 1.0, "output gain", min=0))

        @classmethod
        def from_config(cls, spec, X_train):
            return super().from_config(spec, X_train)

    monkeypatch.setitem(FEATURE_MAPS, Scaled.name, Scaled)
    X, y = _data()
    with pytest.raises(ValueError, match="'scaled_gain'.*estimator_class\\('kernel_ogd'\\)"):
        E.KernelOGDRegressor(feature_map=Scaled.name).fit(X, y)
    cls = E.estimator_class("kernel_ogd")
    assert cls is not E.KernelOGDRegressor and cls.__name__ == "KernelOGDRegressor"
    est = cls(feature_map=Scaled.name, scaled_gain=2.0, eta=0.3, random_state=0).fit(X, y)
    assert type(est.feature_map_) is Scaled and est.get_params()["scaled_gain"] == 2.0
    with pytest.raises(ValueError, match="'feature_map' parameter .* must be one of"):
        cls(feature_map="no_such_map").fit(X, y)


def test_default_feature_map_is_fourier_and_warns():
    X, y = _data()
    with pytest.warns(FutureWarning, match="feature_map=None now means 'fourier'.*coordinate"):
        est = E.FixedRandomRegressor(r=20, random_state=0).fit(X, y)
    assert isinstance(est.feature_map_, Fourier)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        explicit = E.FixedRandomRegressor(r=20, feature_map="fourier", random_state=0).fit(X, y)
    np.testing.assert_array_equal(explicit.predict(X), est.predict(X))


def test_refusals_name_the_problem():
    X, y = _data()
    with pytest.raises(ValueError, match="average=True: Kernel ridge regression .* returns no"):
        E.KernelRidgeRegressor(average=True, feature_map=KERNEL_MAP).fit(X, y)
    with pytest.raises(ValueError, match="no parameter\\(s\\) \\['rnak'\\]"):
        E.make_estimator("nystroem_ridge", {"rnak": 3})
    with pytest.raises(ValueError, match="takes no budget size"):
        E.make_estimator("kernel_ogd", size=3)
    with pytest.raises(ValueError, match="unknown learner"):
        E.make_estimator("no_such_learner")


def test_a_map_without_kernel_is_refused_by_a_kernel_learner(monkeypatch):
    class NoKernel(Fourier):
        name = "rbf_nokernel"
        has_kernel = False

    monkeypatch.setitem(FEATURE_MAPS, NoKernel.name, NoKernel)
    with pytest.raises(ValueError, match="needs a feature map with a closed-form kernel"):
        E.KernelRidgeRegressor(feature_map=NoKernel.name).fit(*_data())


def test_seed_sequence_random_state_is_not_consumed():
    """A SeedSequence seeds the pass from its first child, as the runner does, and is left as
    it was: two fits give the same numbers."""
    X, y = _data()
    ss = np.random.SeedSequence(11, spawn_key=(3, 4))
    est = E.ShrinkingGradientRegressor(m=9, feature_map=KERNEL_MAP, random_state=ss)
    a = est.fit(X, y).online_losses_.copy()
    b = clone(est).fit(X, y).online_losses_
    np.testing.assert_array_equal(a, b)
    assert ss.n_children_spawned == 0
    child = ss.spawn(1)[0]  # what the runner's fit draws from (its first child)
    res = LEARNERS["shrinking_gradient"].fit(
        X,
        (y - est.y_mean_) / est.y_scale_,
        est.feature_map_,
        np.random.default_rng(child),
        **est.fit_arguments_,
    )
    np.testing.assert_array_equal(a, res.losses * est.y_scale_**2)


# the learners a regression estimator derives from: those that learn with the square loss (a
# learner of ±1 labels only, e.g. nystroem_svm, has no regressor)
REGRESSORS = [n for n, s in LEARNERS.items() if DEFAULT_LOSS in s.supported_losses]


@pytest.mark.parametrize("name", REGRESSORS)
def test_a_command_line_cell_reproduced_from_python(name, tmp_path):
    """What ``ilnrun.load(...).cell(id)`` will do: the estimator built from the cell's learner,
    resolved setting, feature-map section, budget size and seed sequence, fitted on the cell's
    training split, gives the row's online loss and test loss (and Shrinking Gradient's
    Algorithm-2 test loss) exactly."""
    spec = LEARNERS[name]
    methods = {name: {"eta": 0.3} if "eta" in {p.name for p in spec.params} else {}}
    cfg = C.resolve(
        {
            "name": "repro",
            "seed": 5,
            "repetitions": 1,
            "dataset": {"kind": FIRST_DATASET, **DATASETS[FIRST_DATASET].example(tmp_path)},
            "feature_map": {"kind": KERNEL_MAP},
            "budget": {"dsgd_k": 2},
            "evaluation": {"m_test": 20, "curve_points": 5},
            "methods": methods,
        }
    )
    cell = C.cells(cfg)[0]
    row = run_cell(cfg, cell)["row"]
    inst = instance(cfg.seed, cfg.feature_map, cell)
    d = inst.data
    size = row.get(spec.budget.name) if spec.budget is not None and cell.per_round else None
    est = E.make_estimator(
        name,
        cell.hyper,
        cfg["feature_map"],
        size=None if size is None else int(size),
        random_state=seed_sequence(cfg["seed"], cell.key),
        center_y=False,
        scale_y=False,
        m_test=cfg["evaluation"]["m_test"],
    ).fit(d.X_train, d.y_train)
    assert float(np.mean(est.online_losses_)) == row["online_loss"]
    test_loss = float(0.5 * np.mean((est.predict(d.X_test) - d.y_test) ** 2))
    assert test_loss == pytest.approx(row["test_loss"], rel=1e-12, abs=1e-15)
    if np.isfinite(row["test_loss_estimated"]):
        n = cfg["evaluation"]["n_test_estimated"]
        n = len(d.y_test) if n == "all" else min(n, len(d.y_test))
        est.set_params(predict_mode="estimated")
        est_loss = float(0.5 * np.mean((est.predict(d.X_test[:n]) - d.y_test[:n]) ** 2))
        assert est_loss == row["test_loss_estimated"]


@pytest.mark.parametrize("kind", list(FEATURE_MAPS))
@pytest.mark.parametrize("name", REGRESSORS)
def test_every_learner_with_every_map(name, kind):
    """Every registered learner with every registered map, at the default steps: a finite fit
    and finite predictions, or a divergence that says so (a map of another scale may need a
    smaller step), or (a kernel learner with a map without kernel) a refusal that says so. The
    built-in pairs do not diverge at their defaults."""
    X, y = _data(n=30)
    est = E.estimator_class(name)(feature_map=kind, random_state=0)
    if LEARNERS[name].needs_kernel and not FEATURE_MAPS[kind].has_kernel:
        with pytest.raises(ValueError, match="closed-form kernel"):
            est.fit(X, y)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    said = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(said) == len(caught), [str(w.message) for w in caught]  # no default map used
    assert bool(said) == est.diverged_  # a divergence is never silent
    assert est.feature_map_.name == kind
    built_in = LEARNERS[name].fit.__module__.startswith("ilnrun.") and FEATURE_MAPS[
        kind
    ].__module__.startswith("ilnrun.")
    assert not (built_in and est.diverged_), "a built-in pair diverges at its default steps"
    if not est.diverged_:
        assert np.all(np.isfinite(est.predict(X))) and len(est.online_losses_) == 30


def test_a_fitted_estimator_pickles():
    """The derived classes are module attributes under their names: pickle (joblib workers,
    GridSearchCV with n_jobs) finds them."""
    import pickle

    X, y = _data()
    for cls in (E.ShrinkingGradientRegressor, E.NystroemRidgeRegressor):
        est = cls(feature_map=KERNEL_MAP, random_state=0).fit(X, y)
        again = pickle.loads(pickle.dumps(est))
        assert type(again) is cls
        np.testing.assert_array_equal(again.predict(X), est.predict(X))


# Fixed-Random's estimator as a user gets it with no argument (the feature map's default
# included): scikit-learn's checks pass with no expected failure (its eta = 0.1 default, a
# config's, failed check_regressors_train: spec.estimator_defaults)
DEFAULTS = [E.FixedRandomRegressor()]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the feature_map default's warning
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(DEFAULTS)
def test_the_defaults_pass_scikit_learns_checks(estimator, check):
    check(estimator)


def test_estimator_defaults_name_the_learners_parameters():
    """An estimator default is one of the learner's parameters, valid for it (a typo would
    otherwise be a parameter no config has)."""
    for spec in LEARNERS.values():
        params = {p.name: p for p in spec.params}
        assert set(spec.estimator_defaults) <= set(params), spec.name
        for name, value in spec.estimator_defaults.items():
            problems: list = []
            check_value(params[name], value, f"{spec.name}.{name}", problems)
            assert not problems, problems


@pytest.mark.parametrize("cls", [E.ShrinkingGradientRegressor, E.DoublySGDRegressor])
def test_hostile_sizes_and_labels_are_value_errors(cls):
    """A budget size or m_test beyond what the samplers draw (a C long), and labels whose
    squared losses overflow, are refused as ValueError (scikit-learn's convention), not an
    OverflowError from numba or numpy."""
    X, y = _data()
    size = cls._spec.budget.name
    with pytest.raises(ValueError, match=f"'{size}' parameter"):
        cls(**{size: 10**30}, feature_map=KERNEL_MAP, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="'m_test' parameter"):
        cls(m_test=10**30, feature_map=KERNEL_MAP, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="too large to centre and scale"):
        cls(feature_map=KERNEL_MAP, random_state=0).fit(X, y * 1e300)


def test_the_factories_refuse_what_is_not_a_learner_or_a_setting():
    with pytest.raises(ValueError, match="unknown learner 'no_such_learner'"):
        E.estimator_class("no_such_learner")
    with pytest.raises(TypeError, match="not int"):
        E.estimator_class(3)
    with pytest.raises(TypeError, match="setting is a mapping of hyperparameters, not list"):
        E.make_estimator("shrinking_gradient", [("eta", 0.3)])
    with pytest.raises(ValueError, match="unknown learner"):
        E.make_estimator(["shrinking_gradient"])
