"""The common contract, run over every registered learner, feature map and dataset (a new one is
tested without editing a test): specs that match their code, well-formed results, counters equal
to the spec's formulas, determinism, and datasets that build."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from openml_cache import EXAMPLES
from test_losses import PM1

from ilnrun import config as C
from ilnrun.budget import derive
from ilnrun.cell import evaluate, instance, run_cell
from ilnrun.datasets import DATASETS, build_dataset
from ilnrun.features import FEATURE_MAPS, build_feature_map
from ilnrun.learners import LEARNERS
from ilnrun.learners.base import ROLES, FeatureExpansion, FitResult, KernelExpansion
from ilnrun.losses import DEFAULT_LOSS, LOSSES
from ilnrun.params import check_value

T = 24  # rounds of the signature checks


KERNEL_MAP = next(n for n, m in FEATURE_MAPS.items() if m.has_kernel)
FIRST_DATASET = next(n for n, d in DATASETS.items() if not d.needs_kernel)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small instance of the first registered dataset, from its own example."""
    example = DATASETS[FIRST_DATASET].example(tmp_path_factory.mktemp("data"))
    return build_dataset({"kind": FIRST_DATASET, **example}, np.random.default_rng(0))


def _arguments(spec, T: int) -> dict:
    """The spec's defaults, a small step, and its size from a matched budget of k = 2."""
    h = {p.name: p.default for p in spec.params}
    if "eta" in h:  # a batch learner has no step size
        h["eta"] = 0.1
    for key in spec.unused(h):
        h[key] = None
    size = derive("evaluations", 2, T).size(spec.budget.name) if spec.takes_budget(h) else None
    return spec.fit_arguments(h, size, T)


def _loss(spec) -> str:
    """The loss a learner is checked with: the square loss where it learns with it, else its
    first (a classifier's: on ±1 labels, :func:`_labels`)."""
    supported = spec.supported_losses
    return DEFAULT_LOSS if DEFAULT_LOSS in supported else supported[0]


def _labels(spec, y: np.ndarray) -> np.ndarray:
    """``y``, or its signs (±1) for a learner whose loss needs ±1 labels."""
    return np.where(y >= 0, 1.0, -1.0) if LOSSES[_loss(spec)].labels == "pm1" else y


def _has(name: str, param: str) -> bool:
    return param in {p.name for p in LEARNERS[name].params}


@pytest.mark.parametrize("name", list(LEARNERS))
def test_spec_matches_its_fit(name):
    spec = LEARNERS[name]
    sig = inspect.signature(spec.fit)
    keywords = set(sig.parameters)
    for p in spec.params:  # a parameter is a keyword of fit, or consumed by the spec's hook
        assert p.name in keywords or spec.arguments is not None, (name, p.name)
    assert set(_arguments(spec, T)) <= keywords
    if spec.budget is not None:
        assert spec.budget.name in keywords
    assert "deadline" in keywords  # every learner honours limits.cell_timeout_s
    assert spec.role in ROLES and spec.label and spec.short and spec.summary
    for p in spec.params:  # every parameter's default passes its own validation
        problems: list = []
        check_value(p, p.default, p.name, problems)
        assert problems == [], (name, p.name)


@pytest.mark.parametrize("name", list(LEARNERS))
def test_fit_is_well_formed_counted_and_deterministic(name, data):
    spec = LEARNERS[name]
    X, y = data.X_train, _labels(LEARNERS[name], data.y_train)
    T = len(y)
    fmap = build_feature_map({"kind": KERNEL_MAP}, X)
    args = _arguments(spec, T)
    res = spec.fit(X, y, fmap, np.random.default_rng(1), **args)
    again = spec.fit(X, y, fmap, np.random.default_rng(1), **args)
    assert isinstance(res, FitResult)
    assert not res.diverged and not res.timed_out
    assert res.losses.shape == (T,) and np.all(np.isfinite(res.losses))
    assert set(res.counters) >= {"train_evals", "features_sampled", "kernel_evals", "shrinks"}
    assert isinstance(res.predictor, (KernelExpansion, FeatureExpansion))
    np.testing.assert_array_equal(res.losses, again.losses)  # same seed, same numbers
    assert res.counters == again.counters
    if spec.budget is not None and spec.budget.name in args:
        expected = spec.budget.expected(args[spec.budget.name], T)
        assert {k: res.counters[k] for k in expected} == expected


@pytest.mark.parametrize("name", list(LEARNERS))
def test_a_cell_of_every_learner_gives_a_complete_row(name, tmp_path, monkeypatch):
    """Through the runner: one cell of each learner on the first dataset's example (a ±1
    dataset, the tests' own, for a learner whose loss needs ±1 labels)."""
    loss = _loss(LEARNERS[name])
    kind = FIRST_DATASET
    if LOSSES[loss].labels == "pm1":
        monkeypatch.setitem(DATASETS, PM1.name, PM1)
        kind = PM1.name
    cfg = C.resolve(
        {
            "name": "contract",
            "repetitions": 1,
            "loss": loss,
            "dataset": {"kind": kind, **DATASETS[kind].example(tmp_path)},
            "feature_map": {"kind": KERNEL_MAP},
            "budget": {"dsgd_k": 2},
            "evaluation": {"m_test": 20, "curve_points": 5},
            "methods": {name: {"eta": 0.1} if _has(name, "eta") else {}},
        }
    )
    cell = C.cells(cfg)[0]
    rec = run_cell(cfg, cell)
    row = rec["row"]
    assert rec["id"] == cell.id and row["method"] == name
    for key in ("online_loss", "val_loss", "test_loss", "train_evals", *LOSSES[loss].metrics):
        assert np.isfinite(row[key]), key
    assert len(rec["curve"]["t"]) == len(rec["curve"]["online_loss"])
    inst = instance(cfg.seed, cfg.feature_map, cell)
    assert evaluate(
        LEARNERS[name].fit(
            inst.data.X_train,
            inst.data.y_train,
            inst.fmap,
            np.random.default_rng(0),
            **_arguments(LEARNERS[name], len(inst.data.y_train)),
        ),
        inst,
        cfg.evaluation,
        np.random.default_rng(0),
    )["eval_mode"] in ("exact", "estimated")


@pytest.mark.parametrize("kind", list(FEATURE_MAPS))
def test_feature_map_shapes_and_declared_sizes(kind):
    X = np.random.default_rng(0).standard_normal((8, 5))
    fmap = build_feature_map({"kind": kind}, X)
    W = fmap.sample(np.random.default_rng(1), 7)
    assert len(W) == 7
    assert int(np.prod(W.shape[1:])) == fmap.param_floats(5)
    assert fmap.matrix(X, W).shape == (8, 7)
    assert fmap.check_data({"kind": kind}, X) is None
    assert fmap.choices and fmap.describe()["kind"] == kind


@pytest.mark.parametrize("kind", list(FEATURE_MAPS))
def test_feature_map_parameters_from_bits_follow_mu(kind):
    """``FeatureMap.sample_bits`` (the Algorithm-2 stream ``inverse_cdf_v2``): ``None``, or as
    many parameters as bits, shaped and typed as :meth:`sample`'s, a function of the bits, and
    drawn from ``mu``: with a closed-form kernel, the Monte-Carlo kernel of 40 000 of them within
    4.5 standard errors of it at every pair of 5 points."""
    X = np.random.default_rng(0).standard_normal((5, 4)) / 2.0
    fmap = build_feature_map({"kind": kind}, X)
    bits = np.random.default_rng(2).integers(0, 2**32, 40_000, dtype=np.uint64)
    W = fmap.sample_bits(bits)
    if W is None:
        return
    ref = fmap.sample(np.random.default_rng(1), 3)
    assert W.shape == (len(bits), *ref.shape[1:]) and W.dtype == ref.dtype
    np.testing.assert_array_equal(fmap.sample_bits(bits[:7]), W[:7])
    if not fmap.has_kernel:
        return
    M = fmap.matrix(X, W)  # (5, n)
    prods = M[:, None, :] * M[None, :, :]
    se = prods.std(axis=2, ddof=1) / np.sqrt(len(bits))
    assert (np.abs(prods.mean(axis=2) - fmap.kernel(X, X)) <= 4.5 * se + 1e-15).all()


@pytest.mark.parametrize("kind", list(DATASETS))
def test_every_dataset_builds_at_a_small_size(kind, tmp_path):
    spec = DATASETS[kind]
    example = spec.example or EXAMPLES.get(kind)  # a kind whose data only the tests can fake
    assert example is not None and spec.choices and spec.summary
    assert "T" in {p.name for p in spec.params}
    cfg = C.resolve(
        {
            "name": "contract",
            "repetitions": 1,
            "dataset": {"kind": kind, **example(tmp_path)},
            "feature_map": {"kind": KERNEL_MAP},
            "methods": {next(iter(LEARNERS)): {"eta": 0.1}},
        },
        base_dir=tmp_path,
    )
    setting = C.dataset_settings(cfg)[0]
    d = build_dataset(setting, np.random.default_rng(0), cfg["feature_map"])
    T = setting["T"]
    assert d.X_train.shape[0] == T == len(d.y_train)
    assert d.X_val.shape[1] == d.X_train.shape[1] == d.X_test.shape[1]
    assert len(d.y_val) > 0 and len(d.y_test) > 0
    assert np.max(np.abs(d.y_train)) == pytest.approx(1.0)  # labels scaled by 1 / max|y_train|
    for split in (d.y_train, d.y_val, d.y_test):
        assert np.all(np.isfinite(split))
    again = build_dataset(setting, np.random.default_rng(0), cfg["feature_map"])
    np.testing.assert_array_equal(d.X_test, again.X_test)


@pytest.mark.parametrize("kind", list(DATASETS))
def test_dataset_builder_signature_agrees_with_its_params(kind):
    """A dataset's keyword parameters are its declared ``Param``s, with their defaults (declared
    once, in the ``Param``); ``feature_map`` is added for a kind labelled by the kernel."""
    spec = DATASETS[kind]
    sig = inspect.signature(spec.build)
    rng, *keywords = sig.parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in keywords), kind
    extra = {"feature_map"} if spec.needs_kernel else set()
    assert {p.name for p in keywords} == {p.name for p in spec.params} | extra
    for p in spec.params:
        assert sig.parameters[p.name].default == p.default, (kind, p.name)
