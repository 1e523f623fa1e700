"""The four worked examples of docs/architecture.md §4–§6.1 registered together (``toy_plugins``):
one tiny config that uses the toy dataset, the toy feature map and the toy learner beside built-in
ones, taken through ``ilnrun validate``, ``run`` and ``report``; and the toy loss (issue 27: a
loss added as the docs say works through every command, the estimators and both engines). Always
on; ``make test-plugins`` runs the plugin-contract tests with the toys registered for the whole
run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import toy_plugins
from conftest import invoke, refused, tiny_config, write_config
from test_losses import PM1, toy_pm1

from ilnrun.datasets import DATASETS


def test_a_toy_learner_map_and_dataset_together_through_validate_run_report(monkeypatch, tmp_path):
    toy_plugins.register(monkeypatch.setitem)
    cfg = tiny_config(repetitions=2)
    cfg["dataset"] = {"kind": toy_plugins.DATASET.name, "D": 3, "T": 20, "n_val": 10, "n_test": 15}
    cfg["feature_map"] = {"kind": toy_plugins.FEATURE_MAP.name, "gain": 0.5}
    cfg["methods"] = {
        "shrinking_gradient": {"eta": [0.3, 1.0]},
        "kernel_ogd": {"eta": 0.3},
        toy_plugins.LEARNER.name: {"eta": [0.3, 1.0]},
    }
    path = write_config(tmp_path / "toys.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    assert toy_plugins.LEARNER.name in val.output
    out = tmp_path / "results"
    run = invoke(["run", path, "--out", out, "--jobs", "1", "-q"])
    assert run.exit_code == 0, run.output
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["method"]) == set(cfg["methods"])
    assert len(runs) == 2 * (2 + 1 + 2) and not runs["diverged"].any()
    assert (runs["fmap_gain"] == 0.5).all() and runs["q"].notna().any()
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    text = (out / "REPORT.md").read_text()
    assert toy_plugins.LEARNER.label in text
    assert toy_plugins.FEATURE_MAP.choices in text
    assert toy_plugins.DATASET.choices[0] in text


def _toy_loss_config() -> dict:
    """Doubly SGD, Fixed-Random and kernel OGD learning with the toy loss (the experiment's
    ``loss``) on the test-only ±1 dataset of tests/test_losses.py."""
    return {
        "name": "toy_loss",
        "seed": 3,
        "repetitions": 2,
        "loss": toy_plugins.LOSS.name,
        "dataset": {"kind": PM1.name, "D": 4, "T": 60, "n_val": 30, "n_test": 40},
        "feature_map": {"kind": "relu"},
        "budget": {"dsgd_k": 2},
        "evaluation": {"m_test": 30, "curve_points": 5},
        "methods": {
            "doubly_sgd": {"eta": [0.03, 0.1]},
            "fixed_random": {"eta": 0.1},
            "kernel_ogd": {"eta": 0.1},
        },
    }


def test_a_toy_loss_through_validate_run_report_and_the_engines(monkeypatch, tmp_path, capsys):
    """The toy loss of docs/architecture.md §6.1 (1 module, 1 registry line): validated, run by
    the numpy engine (the compiled passes declare the square loss: the numpy pass runs it, with
    a note), scored with its own value and ``test_error``, reported; refused by the jax engine
    and by Shrinking Gradient (it gives no ``derivative_series``) at validation, the key named."""
    from ilnrun.learners import shrinking_gradient_kernels as kernels

    toy_plugins.register(monkeypatch.setitem)
    monkeypatch.setitem(DATASETS, PM1.name, PM1)
    monkeypatch.setattr(kernels, "_NOTED", set())  # the note is printed once a process
    monkeypatch.delenv(kernels.NOTED_ENV, raising=False)  # ... and its workers
    name = toy_plugins.LOSS.name
    cfg = _toy_loss_config()
    path = write_config(tmp_path / "loss.yaml", cfg)
    val = invoke(["validate", path])
    assert val.exit_code == 0, val.output
    assert f"loss = '{name}' is not implemented by the compiled pass of doubly_sgd" in val.output
    out = tmp_path / "results"
    run = invoke(["run", path, "--out", out, "--jobs", "1", "-q"])
    assert run.exit_code == 0, run.output
    said = run.output + capsys.readouterr().err
    for learner in ("doubly_sgd", "fixed_random"):  # the compiled passes' fallback, named
        assert f"loss = '{name}' is not implemented by the compiled pass of {learner}" in said
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["method"]) == set(cfg["methods"]) and len(runs) == 2 * (2 + 1 + 1)
    assert (runs["loss"] == name).all() and not runs["diverged"].any()
    assert (runs["test_loss_zero"] == 1.0).all()  # exp(−y · 0)
    assert runs["test_nmse"].isna().all()  # a classification loss: test_error, no NMSE
    assert runs["test_error"].between(0.0, 1.0).all()
    assert np.isfinite(runs[["test_loss", "test_loss_const", "val_loss"]]).all().all()
    assert (runs["test_loss"] < runs["test_loss_zero"]).any()  # it learns
    rep = invoke(["report", out])
    assert rep.exit_code == 0, rep.output
    assert name in (out / "REPORT.md").read_text()
    jax = write_config(tmp_path / "jax.yaml", cfg | {"engine": "jax"})
    keys = [f"methods.{m}.loss:" for m in cfg["methods"]]
    refused(invoke(["validate", jax]), *keys, f"loss = '{name}' is not implemented by the jax")
    refused(invoke(["run", jax, "--out", tmp_path / "jax"]), f"loss = '{name}'")
    sg = _toy_loss_config()
    sg["methods"] = {"shrinking_gradient": {"eta": 0.3, "loss": name}}
    del sg["loss"]
    sg_path = write_config(tmp_path / "sg.yaml", sg)
    sg_key = "methods.shrinking_gradient.loss:"
    refused(invoke(["validate", sg_path]), sg_key, name, "derivative_series")


def test_a_toy_loss_in_the_classifiers(monkeypatch):
    """``DoublySGDClassifier(loss=<toy loss>)``: the learner's pass with that loss on the ±1
    labels, bit for bit, and better than chance; no ``predict_proba`` (the toy gives no
    ``probability``)."""
    from ilnrun.estimators import DoublySGDClassifier, FixedRandomClassifier
    from ilnrun.features import build_feature_map
    from ilnrun.learners import LEARNERS

    toy_plugins.register(monkeypatch.setitem)
    name = toy_plugins.LOSS.name
    d = toy_pm1(np.random.default_rng(4), D=4, T=200, n_val=5, n_test=200, flip=0.0)
    y = np.where(d.y_train > 0, "pos", "neg")
    est = DoublySGDClassifier(k=3, eta=0.03, loss=name, feature_map="relu", random_state=5)
    est.fit(d.X_train, y)
    fmap = build_feature_map({"kind": "relu"}, d.X_train)
    res = LEARNERS["doubly_sgd"].fit(
        d.X_train, d.y_train, fmap, np.random.default_rng(5), k=3, eta=0.03, loss=name
    )
    np.testing.assert_array_equal(est.online_losses_, res.losses)
    assert not est.diverged_ and not res.diverged
    y_test = np.where(d.y_test > 0, "pos", "neg")
    assert np.mean(est.predict(d.X_test) == y_test) > 0.6
    assert not hasattr(est, "predict_proba")
    fr = FixedRandomClassifier(r=30, eta=0.1, loss=name, feature_map="relu", random_state=5)
    assert not fr.fit(d.X_train, y).diverged_ and fr.score(d.X_test, y_test) > 0.6


def test_a_toy_loss_that_overflows_stops_the_pass_without_a_numpy_warning(monkeypatch):
    """``exp(−y p)`` overflows near ``|p| = 710``, long before the divergence bound ``1e6``. The
    pass stops at that round (``diverged_``; the overflowed loss is its last) and the classifier
    says so by its ``ConvergenceWarning`` alone: numpy's overflow warning is silenced where the
    overflow is detected (``OnlinePass.diverges``), not left to escape first, and the pass never
    steps along the infinite derivative (which warned again, and made ``inf − inf`` products)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from ilnrun.estimators import DoublySGDClassifier, FixedRandomClassifier, KernelOGDClassifier

    toy_plugins.register(monkeypatch.setitem)
    name = toy_plugins.LOSS.name
    d = toy_pm1(np.random.default_rng(4), D=4, T=200, n_val=5, n_test=20, flip=0.0)
    y = np.where(d.y_train > 0, "pos", "neg")
    for cls, size in ((DoublySGDClassifier, {"k": 3}), (FixedRandomClassifier, {"r": 30})):
        for eta in (3.0, 100.0, 1e4):
            est = cls(eta=eta, loss=name, feature_map="fourier", random_state=5, **size)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est.fit(d.X_train, y)
            shown = [(w.category.__name__, str(w.message)[:80]) for w in caught]
            assert [w.category for w in caught] == [ConvergenceWarning], (cls, eta, shown)
            assert "or its loss was not finite" in str(caught[0].message)
            assert est.diverged_ and np.isfinite(est.online_losses_[:-1]).all()
    est = KernelOGDClassifier(eta=100.0, loss=name, feature_map="fourier", random_state=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(d.X_train, y)
    assert [w.category for w in caught] == [ConvergenceWarning] and est.diverged_
