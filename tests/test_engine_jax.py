"""The jax engine against the numpy engine (ilnrun.engines).

- Deterministic parts, given the same draws: kernel OGD's whole pass, Fixed-Random's SGD pass,
  Doubly SGD's predictions and Shrinking Gradient's rounds equal numpy's to rounding.
- The stochastic whole, in distribution: over 40 seeds on one dataset, the mean online loss, test
  loss and shrink count of the two engines differ by less than 4 standard errors.
- Counters equal numpy's; a cell alone and inside a batch of 50 are identical; ``ilnrun run
  --engine jax`` twice gives identical tables, resumes, refuses the other engine's directory and
  marks a diverging setting.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from conftest import make_data, tiny_config, write_config

jax = pytest.importorskip("jax", reason="the jax engine needs jax (pip install 'ilnrun[jax]')")

import jax.numpy as jnp  # noqa: E402

from ilnrun import experiment  # noqa: E402
from ilnrun.cli import main  # noqa: E402
from ilnrun.config.schema import has_jax_twin  # noqa: E402
from ilnrun.engines import jax_env, jax_runner  # noqa: E402
from ilnrun.features import FEATURE_MAPS  # noqa: E402
from ilnrun.learners import (  # noqa: E402
    LEARNERS,
    doubly_sgd,
    fixed_random,
    kernel_ogd,
    shrinking_gradient,
)
from ilnrun.learners.jax_pass import Round  # noqa: E402

jax_env.setup()
LEARNER = {name: spec for name, spec in LEARNERS.items()}
SG, DSGD, FR, KOGD = (m.SPEC for m in (shrinking_gradient, doubly_sgd, fixed_random, kernel_ogd))


class Recorder:
    """A numpy Generator that records (a copy of) every draw, in order."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[str, np.ndarray]] = []

    def __getattr__(self, name):
        fn = getattr(self.rng, name)

        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            self.calls.append((name, np.array(out, copy=True)))
            return out

        return call


def _data_dict(d, fmap, K: bool = False) -> dict:
    X = jnp.asarray(d.X_train[None])
    out = {
        "X": X,
        "y": jnp.asarray(d.y_train[None]),
        "fmap": {k: jnp.asarray([v]) for k, v in fmap.jax_params().items()},
    }
    if K:
        out["K"] = jnp.asarray(fmap.kernel(d.X_train, d.X_train)[None])
    return out


def _cell(mod, args: dict, T: int) -> dict:
    cell = {k: jnp.asarray(v) for k, v in mod.inputs(args, T).items()}
    cell.update(inst=jnp.int64(0), key=jnp.zeros(2, dtype=jnp.uint32))
    return cell


def _coordinate(d):
    return FEATURE_MAPS["coordinate"](d.X_train.shape[1])


def _map(kind: str, d):
    if kind == "fourier":
        return FEATURE_MAPS[kind](d.X_train.shape[1], sigma=1.5)
    return FEATURE_MAPS[kind](d.X_train.shape[1])


class SampleRecorder:
    """A feature map whose ``sample`` records (a copy of) every draw, in order; all else is the
    wrapped map's."""

    def __init__(self, fmap) -> None:
        self.fmap, self.draws = fmap, []

    def __getattr__(self, name):
        return getattr(self.fmap, name)

    def sample(self, rng, n):
        W = self.fmap.sample(rng, n)
        self.draws.append(np.array(W, copy=True))
        return W


def _steps(mod, args, d, fmap, fn, per_round=()):
    """Run ``fn(ctx, c, t, *per_round[t])`` (jitted) over every round from ``mod.init``; the
    pass's result."""
    st, T = mod.static(args), len(d.y_train)
    data, cell = _data_dict(d, fmap, K=mod is KOGD.engine("jax")), _cell(mod, args, T)
    c = mod.init(Round(st, T, d.X_train.shape[1], type(fmap), data, cell))
    ctx = Round(st, T, 0, type(fmap), data, cell)
    step = jax.jit(lambda c, t, *draws: fn(ctx, c, t, *draws))
    per_round = list(per_round)
    per_round += per_round[-1:] * (T - len(per_round))  # rounds after a divergence: ignored
    for t in range(T):
        c = step(c, t, *(jnp.asarray(x) for x in (per_round[t] if per_round else ())))
    return mod.result(st, args, jax.device_get(c), fmap, T)


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * 1e-3)


# ---- deterministic parts, given the same draws: one harness per learner ------------------------


def _kernel_ogd(kind: str, variant: dict) -> None:
    """The whole pass (no draws)."""
    d = make_data(T=60)
    fmap = _map(kind, d)
    args = {"eta": 0.5, "schedule": "inv_sqrt", **variant}
    ref = KOGD.fit(d.X_train, d.y_train, fmap, np.random.default_rng(0), **args)
    mod = KOGD.engine("jax")
    res = _steps(mod, args, d, fmap, mod.step)
    _close(res.losses, ref.losses)
    _close(res.predictor.alpha, ref.predictor.alpha)
    assert res.counters == ref.counters
    if variant.get("shrink"):
        assert ref.counters["shrinks"] > 0  # the shrink branch is exercised


def _fixed_random(kind: str, variant: dict) -> None:
    """The SGD pass given numpy's drawn features."""
    d = make_data(T=50)
    fmap = _map(kind, d)
    args = {"eta": 0.5, "r": 37, "lam": 0.0, "schedule": "inv_sqrt", **variant}
    ref = FR.fit(d.X_train, d.y_train, fmap, np.random.default_rng(3), **args)
    W = ref.predictor.W  # the drawn features (no padding here: the layouts agree)
    mod = FR.engine("jax")
    st, T = mod.static(args), len(d.y_train)
    data, cell = _data_dict(d, fmap), _cell(mod, args, T)
    c = mod.start(st, T, jnp.asarray(W))
    ctx = Round(st, T, 0, type(fmap), data, cell)
    step = jax.jit(lambda c, t: mod.step(ctx, c, t))
    for t in range(T):
        c = step(c, t)
    res = mod.result(st, args, jax.device_get(c), fmap, T)
    _close(res.losses, ref.losses)
    _close(res.predictor.coef, ref.predictor.coef)
    np.testing.assert_array_equal(res.predictor.W, ref.predictor.W)
    assert res.counters == ref.counters


def _doubly_sgd(kind: str, variant: dict) -> None:
    """The predictions given numpy's draws of every round's k features."""
    d = make_data(T=40)
    fmap = _map(kind, d)
    args = {"eta": 0.5, "k": 3, "nu": 0.0, "schedule": "constant", **variant}
    rec = SampleRecorder(fmap)
    ref = DSGD.fit(d.X_train, d.y_train, rec, np.random.default_rng(5), **args)
    mod = DSGD.engine("jax")
    res = _steps(mod, args, d, fmap, mod.round_given, [(w,) for w in rec.draws])
    _close(res.losses, ref.losses)
    _close(res.predictor.predict(d.X_test), ref.predictor.predict(d.X_test), 1e-10)
    assert res.counters == ref.counters


def _shrinking_gradient(kind: str, variant: dict) -> None:
    """Every round given numpy's draws (the uniforms of i, then the m features)."""
    d = make_data(T=60)
    fmap = _map(kind, d)
    args = {"eta": 0.8, "m": 25, "B": 1.0, "sampler": "iid", "schedule": "constant", **variant}
    rng, rec = Recorder(11), SampleRecorder(fmap)
    ref = SG.fit(d.X_train, d.y_train, rec, rng, **args)
    uniforms = [out for name, out in rng.calls if name == "random"]
    m = args["m"]
    # numpy draws from round 2 on (alpha != 0): u (m uniforms or one offset), then m w's
    assert len(uniforms) == len(rec.draws) == len(ref.losses) - 1 - ref.diverged
    draws = [(np.zeros(m), np.zeros_like(rec.draws[0]))]
    for u, w in zip(uniforms, rec.draws, strict=True):
        draws.append((u if args["sampler"] == "iid" else (np.arange(m) + u) / m, w))
    mod = SG.engine("jax")
    res = _steps(mod, args, d, fmap, mod.round_given, draws)
    assert res.counters == ref.counters
    if args["B"] < 1:
        assert ref.counters["shrinks"] > 0  # the shrink branch is exercised
    _close(res.losses, ref.losses, 1e-10)
    _close(res.predictor.alpha, ref.predictor.alpha, 1e-10)
    _close(res.averaged.alpha, ref.averaged.alpha, 1e-10)
    for key in ("alpha_l1", "shrinks_before"):
        np.testing.assert_allclose(res.extras[key], ref.extras[key], rtol=1e-10)


# each learner's harness and the settings it is tried with (the first on every map, the others
# on the first map): a learner given a jax pass must be given a harness here
HARNESSES = {
    "kernel_ogd": (_kernel_ogd, [{}, {"shrink": True, "B": 0.02}]),
    "fixed_random": (_fixed_random, [{}, {"lam": 0.05}]),
    "doubly_sgd": (_doubly_sgd, [{}, {"nu": 0.1}]),
    "shrinking_gradient": (
        _shrinking_gradient,
        [{}, {"sampler": "systematic"}, {"B": 0.02}],
    ),
}
JAX_LEARNERS = [name for name, spec in LEARNERS.items() if "jax" in spec.engines]
JAX_MAPS = [name for name, cls in FEATURE_MAPS.items() if has_jax_twin(cls)]


def _equivalence_cases() -> list:
    out = []
    for name in JAX_LEARNERS:
        variants = HARNESSES.get(name, (None, [{}]))[1]
        for kind in JAX_MAPS:
            if LEARNERS[name].needs_kernel and kind not in KERNEL_MAPS:
                continue
            for i, v in enumerate(variants if kind == JAX_MAPS[0] else variants[:1]):
                out.append(pytest.param(name, kind, v, id=f"{name}-{kind}-{i}"))
    return out


KERNEL_MAPS = set(JAX_MAPS)  # every built-in map has a closed-form kernel


@pytest.mark.parametrize(("name", "kind", "variant"), _equivalence_cases())
def test_jax_pass_equals_numpy(name, kind, variant):
    """Every learner with a jax pass on every feature map with a jax twin (both derived from the
    registries): the jax pass equals the numpy pass to rounding, given the same draws."""
    assert name in HARNESSES, f"learner {name} has a jax pass but no equivalence harness"
    HARNESSES[name][0](kind, variant)


def test_the_built_in_learners_and_maps_are_all_covered():
    assert set(JAX_LEARNERS) >= {"kernel_ogd", "fixed_random", "doubly_sgd", "shrinking_gradient"}
    assert set(JAX_MAPS) >= {"coordinate", "relu", "fourier"}


# ---- batches: a cell's numbers do not depend on its batch -------------------------------------


def _batch(spec, args: dict, d, fmap, keys: np.ndarray, etas: list[float] | None = None):
    """Run one lockstep batch of ``spec`` on dataset ``d``: one cell per key."""
    mod = spec.engine("jax")
    st, T = mod.static(args), len(d.y_train)
    data = {
        k: np.asarray(v) for k, v in _data_dict(d, fmap, spec.needs_kernel).items() if k != "fmap"
    }
    data["fmap"] = {k: np.asarray([v]) for k, v in fmap.jax_params().items()}
    ins = [mod.inputs({**args, "eta": e}, T) for e in (etas or [args["eta"]] * len(keys))]
    cells = {k: np.stack([i[k] for i in ins]) for k in ins[0]}
    cells.update(inst=np.zeros(len(keys), dtype=np.int64), key=keys)
    outs = jax_runner.run_batch(mod, st, T, d.X_train.shape[1], type(fmap), data, cells)
    return [mod.result(st, args, o, fmap, T) for o in outs]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_cell_alone_equals_the_same_cell_in_a_batch_of_50(which):
    d = make_data(T=40)
    fmap = _coordinate(d)
    spec, args = [
        (SG, {"eta": 0.5, "m": 16, "B": 1.0}),
        (DSGD, {"eta": 0.5, "k": 2, "nu": 0.0}),
        (FR, {"eta": 0.5, "r": 30, "lam": 0.0}),
    ][which]
    keys = np.random.default_rng(1).integers(0, 2**32, size=(50, 2), dtype=np.uint32)
    etas = list(np.linspace(0.1, 1.0, 50))
    etas[17] = args["eta"]
    many = _batch(spec, args, d, fmap, keys, etas)[17]
    alone = _batch(spec, args, d, fmap, keys[17:18])[0]
    np.testing.assert_array_equal(alone.losses, many.losses)
    p, q = alone.predictor, many.predictor
    np.testing.assert_array_equal(getattr(p, "alpha", None), getattr(q, "alpha", None))
    np.testing.assert_array_equal(getattr(p, "coef", None), getattr(q, "coef", None))
    assert alone.counters == many.counters


@pytest.mark.parametrize("method", ["scan", "scan_unrolled"])
def test_search_right_is_numpys_searchsorted_in_both_forms(method, monkeypatch):
    """The engine's search (a loop on CPU, unrolled on a GPU) is numpy's ``side="right"``
    search: ties, keys below and above every value, and the ``+inf`` tail of the rounds not
    yet played."""
    from ilnrun import jax_ops

    monkeypatch.setattr(jax_ops, "SEARCH_METHOD", method)
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 64, 1000):
        cum = np.cumsum(rng.integers(0, 3, size=n).astype(float))  # zero steps: ties
        cum[rng.integers(0, n + 1) :] = np.inf
        keys = np.concatenate(
            [
                rng.uniform(-1, cum[np.isfinite(cum)].max(initial=0) + 1, 50),
                cum[np.isfinite(cum)],
                [-np.inf, 0.0],
            ]
        )
        got = np.asarray(jax_ops.search_right(jnp.asarray(cum), jnp.asarray(keys)))
        np.testing.assert_array_equal(got, np.searchsorted(cum, keys, side="right"))


def test_shrinking_gradient_is_the_same_with_the_search_unrolled(monkeypatch):
    """The GPU's form of the search gives the same cell, bit for bit (here on CPU)."""
    from ilnrun import jax_ops

    d = make_data(T=40)
    fmap = _coordinate(d)
    keys = np.random.default_rng(5).integers(0, 2**32, size=(3, 2), dtype=np.uint32)
    args = {"eta": 0.5, "m": 16, "B": 0.05}
    outs = {}
    for method in ("scan", "scan_unrolled"):
        monkeypatch.setattr(jax_ops, "SEARCH_METHOD", method)
        monkeypatch.setattr(jax_runner, "_PROGRAMS", {})
        outs[method] = _batch(SG, args, d, fmap, keys)
    assert sum(r.counters["shrinks"] for r in outs["scan"]) > 0
    for a, b in zip(outs["scan"], outs["scan_unrolled"], strict=True):
        np.testing.assert_array_equal(a.losses, b.losses)
        np.testing.assert_array_equal(a.predictor.alpha, b.predictor.alpha)
        assert a.counters == b.counters


def test_the_search_is_a_loop_on_cpu_and_unrolled_elsewhere(monkeypatch):
    from ilnrun import jax_ops

    monkeypatch.setattr(jax_ops, "SEARCH_METHOD", None)
    monkeypatch.setattr(jax_ops.jax, "default_backend", lambda: "cpu")
    assert jax_ops.search_method() == "scan"
    monkeypatch.setattr(jax_ops.jax, "default_backend", lambda: "gpu")
    assert jax_ops.search_method() == "scan_unrolled"


# ---- the stochastic whole agrees in distribution ------------------------------------------------

SEEDS = 40


def _z(a: np.ndarray, b: np.ndarray) -> float:
    """Difference of the means over its standard error (``0`` when both are constant and
    equal)."""
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    diff = a.mean() - b.mean()
    return 0.0 if diff == 0 and se == 0 else abs(diff) / se


@pytest.mark.parametrize("which", ["sg", "sg_shrinks", "dsgd", "fr"])
def test_engines_agree_in_distribution(which):
    d = make_data(seed=2, D=30, T=80, n_test=200)
    fmap = _coordinate(d)
    spec, args = {
        "sg": (SG, {"eta": 0.5, "m": 20, "B": 1.0, "schedule": "constant"}),
        "sg_shrinks": (SG, {"eta": 1.5, "m": 10, "B": 0.03, "schedule": "constant"}),
        "dsgd": (DSGD, {"eta": 0.5, "k": 2, "nu": 0.0, "schedule": "constant"}),
        "fr": (FR, {"eta": 0.5, "r": 20, "lam": 0.0, "schedule": "inv_sqrt"}),
    }[which]
    K_test = fmap.kernel(d.X_test, d.X_train)

    def stats(results):
        online = np.array([r.losses.mean() for r in results])
        if spec is SG:
            test = np.array([r.predictor.predict_exact(K_test) for r in results])
        else:
            test = np.array([r.predictor.predict(d.X_test) for r in results])
        test = 0.5 * ((test - d.y_test) ** 2).mean(axis=1)
        shrinks = np.array([r.counters["shrinks"] for r in results], dtype=float)
        return online, test, shrinks

    ref = [
        spec.fit(d.X_train, d.y_train, fmap, np.random.default_rng(s), **args) for s in range(SEEDS)
    ]
    keys = np.stack([np.random.SeedSequence(1000 + s).generate_state(2) for s in range(SEEDS)])
    new = _batch(spec, args, d, fmap, keys)
    assert all(r.counters == n.counters for r, n in zip(ref, new, strict=True)) or spec is SG
    a, b = stats(ref), stats(new)
    for name, x, y in zip(("online loss", "test loss", "shrinks"), a, b, strict=True):
        assert _z(x, y) < 4, (name, x.mean(), y.mean())
    if which == "sg_shrinks":
        assert a[2].mean() > 0 and b[2].mean() > 0  # the shrink count is really compared
    if spec is SG:  # counters depend only on the rounds that drew: all but the first here
        assert {r.counters["train_evals"] for r in ref} == {n.counters["train_evals"] for n in new}


# ---- end to end: ilnrun run --engine jax --------------------------------------------------------


def _run(cfg_path: Path, out: Path, *extra: str):
    return CliRunner().invoke(main, ["run", str(cfg_path), "--out", str(out), "-q", *extra])


def _runs(out: Path) -> pd.DataFrame:
    df = pd.read_csv(out / "runs.csv")
    return df.drop(columns=["wall_s", "eval_s"])


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("jaxrun")
    cfg = tiny_config(**{"dataset.D": [20, 40], "methods.fixed_random.eta": [0.3, 60.0]})
    cfg_path = write_config(d / "tiny.yaml", cfg)
    res = _run(cfg_path, d / "a", "--engine", "jax", "--jobs", "1")
    assert res.exit_code == 0, res.output
    return cfg_path, d / "a"


def test_run_twice_gives_identical_tables(jax_run, tmp_path):
    cfg_path, a = jax_run
    assert _run(cfg_path, tmp_path / "b", "--engine", "jax").exit_code == 0
    pd.testing.assert_frame_equal(_runs(a), _runs(tmp_path / "b"), check_exact=True)
    runs = _runs(a)
    assert set(runs["engine"]) == {"jax"}
    assert json.loads((a / "meta.json").read_text())["engine"] == "jax"
    assert "device" in json.loads((a / "meta.json").read_text())
    # counters follow the budget formulas, as with numpy
    for name in set(runs["method"]):  # the learners the config runs (not every registered one)
        spec = LEARNERS[name]
        if spec.budget is None:
            continue
        r = runs[(runs["method"] == name) & ~runs["diverged"]].iloc[0]
        for key, value in spec.budget.expected(int(r[spec.budget.name]), 30).items():
            assert r[key] == value, (name, key)


def _batch_events(monkeypatch) -> list[tuple[str, object]]:
    """``("launch" | "finish", batch)`` in the order the jax engine did them (the batches
    themselves, kept alive: an ``id`` could be reused once one is freed)."""
    events: list[tuple[str, object]] = []
    launch, finish_ = jax_runner._Batch.launch, jax_runner._Batch.finish

    def logged_launch(self):
        events.append(("launch", self))
        return launch(self)

    def logged_finish(self, on_record):
        events.append(("finish", self))
        return finish_(self, on_record)

    monkeypatch.setattr(jax_runner._Batch, "launch", logged_launch)
    monkeypatch.setattr(jax_runner._Batch, "finish", logged_finish)
    return events


def test_a_batch_is_evaluated_while_the_next_one_runs(jax_run, tmp_path, monkeypatch):
    """Each batch's cells are evaluated after the next batch of the wave was handed to the
    device, and the tables are those of batches run one at a time: under a time limit (chunks,
    one batch at a time), and with a memory budget too small for two batches at once."""
    cfg_path, a = jax_run
    events = _batch_events(monkeypatch)
    assert _run(cfg_path, tmp_path / "b", "--engine", "jax").exit_code == 0
    pd.testing.assert_frame_equal(_runs(a), _runs(tmp_path / "b"), check_exact=True)
    kinds = [k for k, _ in events]
    assert kinds.count("launch") == kinds.count("finish") >= 3
    # a finish came right after a later batch's launch
    assert any(
        events[i][0] == "finish"
        and events[i - 1][0] == "launch"
        and events[i][1] is not events[i - 1][1]
        for i in range(1, len(events))
    )
    batches = [b for k, b in events if k == "launch"]
    for b in batches:  # each launched once, finished once, in that order
        at = [i for i, (_, x) in enumerate(events) if x is b]
        assert [events[i][0] for i in at] == ["launch", "finish"]

    events.clear()
    monkeypatch.setattr(jax_runner, "memory_budget", lambda: 4096)
    assert _run(cfg_path, tmp_path / "c", "--engine", "jax").exit_code == 0
    pd.testing.assert_frame_equal(_runs(a), _runs(tmp_path / "c"), check_exact=True)
    assert [k for k, _ in events] == ["launch", "finish"] * (len(events) // 2)

    cfg = yaml.safe_load(cfg_path.read_text())
    cfg.setdefault("limits", {})["cell_timeout_s"] = 3600
    limited = write_config(tmp_path / "limited.yaml", cfg)
    events.clear()
    assert _run(limited, tmp_path / "d", "--engine", "jax").exit_code == 0
    pd.testing.assert_frame_equal(_runs(a), _runs(tmp_path / "d"), check_exact=True)
    assert events == []  # run_limited: no launches


def test_a_device_error_is_raised_by_collect_not_by_the_waiting_thread(monkeypatch):
    import threading

    class DeviceError(RuntimeError):
        pass

    def fail(x):
        raise DeviceError("out of device memory")

    monkeypatch.setattr(jax, "block_until_ready", fail)
    monkeypatch.setattr(jax, "device_get", fail)
    hooked: list = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)
    launched = jax_runner.Launched(jnp.zeros(3), 1, 0.0)
    with pytest.raises(DeviceError):
        launched.collect()
    assert hooked == []  # the waiting thread printed nothing


def test_diverging_setting_is_marked(jax_run):
    runs = _runs(jax_run[1])
    bad = runs[(runs["method"] == "fixed_random") & (runs["eta"] == 60.0)]
    assert len(bad) and bad["diverged"].all()
    assert (bad["rounds"] < 30).all() and np.isinf(bad["test_loss"]).all()
    assert not runs[runs["eta"] != 60.0]["diverged"].any()


def test_resume_and_engine_is_a_config_change(jax_run, tmp_path):
    cfg_path, a = jax_run
    out = tmp_path / "c"
    assert _run(cfg_path, out, "--engine", "jax").exit_code == 0
    log = out / "cells.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:10]))
    assert _run(cfg_path, out, "--engine", "jax").exit_code == 0
    pd.testing.assert_frame_equal(_runs(a), _runs(out), check_exact=True)
    res = _run(cfg_path, out)  # numpy into the jax directory: refused
    assert res.exit_code == 2
    assert "engine" in res.output


def test_time_limit_stops_a_batch_between_chunks(tmp_path):
    cfg = tiny_config(
        **{
            "dataset.T": 300,
            "dataset.D": 10,
            "repetitions": 1,
            "methods": {"kernel_ogd": {"eta": 0.3}},
            "limits": {"cell_timeout_s": 1e-9},
        }
    )
    out = tmp_path / "t"
    assert _run(write_config(tmp_path / "t.yaml", cfg), out, "--engine", "jax").exit_code == 0
    runs = _runs(out)
    assert runs["timed_out"].all() and (runs["rounds"] == jax_runner.TIMEOUT_CHUNK).all()


@pytest.mark.parametrize("kind", ["relu", "fourier"])
def test_other_feature_maps_run(kind, tmp_path):
    fm = {"kind": kind} if kind == "relu" else {"kind": kind, "sigma": 2.0}
    cfg = tiny_config(**{"dataset.D": [5, 9], "repetitions": 1, "feature_map": fm})
    for params in cfg["methods"].values():  # steps small enough for these maps' scales (with
        params["eta"] = [0.03, 0.1]  # eta = 1 some passes blow up, in either engine)
    out = tmp_path / kind
    assert _run(write_config(tmp_path / "f.yaml", cfg), out, "--engine", "jax").exit_code == 0
    runs = _runs(out)
    assert not runs["diverged"].any() and np.isfinite(runs["test_loss"]).all()


def test_engine_jax_without_jax_is_a_clear_error(monkeypatch, config_file, tmp_path):
    import ilnrun.engines

    monkeypatch.setattr(ilnrun.engines, "jax_available", lambda: False)
    res = _run(config_file, tmp_path / "x", "--engine", "jax")
    assert res.exit_code == 2
    assert "pip install 'ilnrun[jax]'" in res.output and "Traceback" not in res.output


def test_inputs_are_padded_to_one_vector_width_on_every_device():
    # one width on every device: a cell's stream must not depend on where it is resumed
    assert jax_runner.width_quantum("cpu") == jax_runner.width_quantum("gpu") == 8


def test_a_cpu_run_says_the_numpy_engine_is_likely_faster(tmp_path):
    cfg = tiny_config(**{"repetitions": 1, "methods": {"kernel_ogd": {"eta": 0.3}}})
    cfg_path = write_config(tmp_path / "n.yaml", cfg)
    res = CliRunner().invoke(
        main, ["run", str(cfg_path), "--out", str(tmp_path / "n"), "--engine", "jax"]
    )
    assert res.exit_code == 0, res.output
    on_cpu = jax.default_backend() == "cpu"
    assert (experiment.CPU_JAX_NOTE in res.output) == on_cpu
    assert res.output.count("numpy engine") == (1 if on_cpu else 0)
    quiet = _run(cfg_path, tmp_path / "q", "--engine", "jax")
    assert experiment.CPU_JAX_NOTE not in quiet.output
