"""The contract of the engines' declarations (ilnrun.learners.implements, docs/architecture.md §8
"What an engine implements"), over every registered learner — the registry, not the built-ins:

- every parameter of a learner, at each of its representative values (every value of a finite
  choice), is accounted for on each of its passes: resolved before any pass, implemented, or
  left to the numpy code (compiled) / refused at validation (jax);
- the compiled pass runs the settings it declares and gives the numpy pass's numbers bit for bit,
  and leaves the others to the numpy code; a key taken out of its declaration is never run
  compiled, and ``fit`` hands every keyword of a setting to the declaration;
- the jax pass is accepted at validation for what it declares and runs it (when jax is
  installed), and is refused with exit status 2, learner, key and value named, for the rest;
- a parameter added to a learner that no pass declares is refused on the jax engine, at any
  value: never silently ignored.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import math
from collections.abc import Iterator

import numpy as np
import pytest
from conftest import invoke, refused, tiny_config, write_config

import ilnrun.config as C
from ilnrun.features import ReLU
from ilnrun.learners import LEARNERS, compiled
from ilnrun.learners.base import LearnerSpec
from ilnrun.learners.implements import ANY, CONTROLS, NOTHING, Implements
from ilnrun.params import ConfigError, Param

T, D, SIZE = 12, 5, 3  # a tiny problem: rounds, input dimension, budget size
HAS_JAX = importlib.util.find_spec("jax") is not None


class NumpyOnly(np.random.Generator):
    """A generator with numpy's stream that is not exactly ``np.random.Generator``: a learner's
    ``fit`` runs its numpy pass for it (a compiled pass is chosen only for the exact type)."""


def _data() -> tuple[np.ndarray, np.ndarray, ReLU]:
    probe = np.random.default_rng(5)
    X = probe.standard_normal((T, D)) / 2.0
    return X, np.tanh(X[:, 0] - X[:, 1]), ReLU(D)


def representative(p: Param) -> list:
    """Values of ``p`` to try: every choice of a finite one, both booleans, else its default,
    another value in its range and its special values."""
    if p.choices:
        return list(p.choices)
    if p.type == "bool":
        return [False, True]
    values = [p.default]
    if p.type in ("int", "float"):
        number = isinstance(p.default, (int, float)) and not isinstance(p.default, bool)
        other = 2 * p.default if number and p.default else (p.min or 0) + 1
        if p.max is not None and other > p.max:
            other = ((p.min or 0) + p.max) / 2
        values.append(int(other) if p.type == "int" else float(other))
    values += [s for s in p.special if s not in values and not isinstance(s, str)]
    return values


def _section(spec: LearnerSpec, given: dict) -> dict | None:
    """The resolved ``methods.<name>`` section of ``given`` (None where the numpy engine refuses
    it: e.g. a combination the learner's ``check`` rules out)."""
    cfg = tiny_config(methods={spec.name: dict(given)}, feature_map={"kind": "relu"})
    try:
        return C.resolve(cfg).as_dict()["methods"][spec.name]
    except ConfigError:
        return None


def settings(spec: LearnerSpec) -> Iterator[tuple[Param, object, dict, dict]]:
    """``(param, value, given, setting)`` for every parameter and representative value: the
    ``given`` section holding it and its one grid setting. Where the value alone is not used
    (``decay`` outside the ``inv`` schedule) or the setting is left out of a grid (ridge without
    ``lam``), one other parameter's value is added: the first that makes it used, else the first
    that makes it run."""
    for p in spec.config_params:
        for v in representative(p):
            runnable = None
            for extra in [{}] + [
                {q.name: w} for q in spec.config_params if q is not p for w in representative(q)
            ]:
                given = {p.name: v, **extra}
                section = _section(spec, given)
                grid = [] if section is None else C.method_grid(spec.name, section)
                if grid and grid[0].get(p.name) == v:
                    break
                if grid and runnable is None:
                    runnable = given, grid
            else:
                if runnable is None:
                    pytest.fail(f"{spec.name}: no runnable setting with {p.name} = {v!r}")
                given, grid = runnable
            yield p, v, given, grid[0]


def _args(spec: LearnerSpec, h: dict) -> dict:
    return spec.fit_arguments(h, SIZE if spec.takes_budget(h) else None, T)


def _same_result(a, b) -> bool:
    """Two ``FitResult`` equal bit for bit: losses, counters, flags and predictor arrays."""
    if not (np.array_equal(a.losses, b.losses) and a.counters == b.counters):
        return False
    if (a.diverged, a.timed_out) != (b.diverged, b.timed_out):
        return False
    pa, pb = vars(a.predictor), vars(b.predictor)
    return all(np.array_equal(pa[k], pb[k]) for k in pa if isinstance(pa[k], np.ndarray)) and type(
        a.predictor
    ) is type(b.predictor)


WITH_COMPILED = [n for n, s in LEARNERS.items() if "compiled" in s.implements]
WITH_JAX = [n for n, s in LEARNERS.items() if "jax" in s.engines]


def test_declarations_name_fit_keywords_of_known_passes():
    """A declaration names passes that exist and keys that are ``fit`` keywords of the learner (a
    misspelt key would be a parameter its pass does not implement)."""
    for name, spec in LEARNERS.items():
        keywords = set(inspect.signature(spec.fit).parameters) - {"X", "y", "fmap", "rng"}
        for pass_name, declared in spec.implements.items():
            assert pass_name in ("compiled", "jax"), (name, pass_name)
            assert set(declared.values) <= keywords, (name, pass_name, declared.values)
        if "jax" in spec.engines:
            assert "jax" in spec.implements, f"{name}: a jax pass that declares nothing"


# ----------------------------------------------------------------------------------------------
# the compiled pass


class Spy:
    """Records what a learner's ``fit`` asks :func:`ilnrun.learners.compiled.implemented` and
    whether its compiled pass (``fit_compiled`` of its module, where it has one) ran."""

    def __init__(self, monkeypatch, spec: LearnerSpec) -> None:
        self.asked: list[dict] = []
        self.answers: list[bool] = []
        self.compiled_runs = 0
        module = inspect.getmodule(spec.fit)
        assert module.implemented is compiled.implemented, (
            f"{spec.name} declares a compiled pass: its fit must choose it with "
            "ilnrun.learners.compiled.implemented"
        )

        def implemented(learner, declared, args, note):
            self.asked.append(dict(args))
            self.answers.append(compiled.implemented(learner, declared, args, note))
            return self.answers[-1]

        monkeypatch.setattr(module, "implemented", implemented)
        run = getattr(module, "fit_compiled", None)
        if run is not None:

            def counted(*a, **kw):
                self.compiled_runs += 1
                return run(*a, **kw)

            monkeypatch.setattr(module, "fit_compiled", counted)
        self.has_compiled = run is not None


@pytest.mark.parametrize("name", WITH_COMPILED)
def test_compiled_pass_runs_what_it_declares_bit_for_bit(name, monkeypatch):
    """For every parameter and representative value: a declared setting runs compiled (numba
    there) with the numpy pass's numbers bit for bit; one outside the declaration runs numpy."""
    spec = LEARNERS[name]
    X, y, fmap = _data()
    keywords = set(inspect.signature(spec.fit).parameters) - {"X", "y", "fmap", "rng"}
    outcome: dict[str, set[str]] = {}
    for p, v, _, h in settings(spec):
        args = _args(spec, h)
        missing = spec.unimplemented("compiled", args)
        spec.fit(X, y, fmap, np.random.default_rng(7), **args)  # the kernels' self-checks, once
        with monkeypatch.context() as mp:
            spy = Spy(mp, spec)
            ref = spec.fit(X, y, fmap, NumpyOnly(np.random.PCG64(7)), **args)
            assert spy.asked == [] and spy.compiled_runs == 0  # numpy only: not asked
            got = spec.fit(X, y, fmap, np.random.default_rng(7), **args)
        assert spy.answers == [not missing], (p.name, v)
        # fit hands every keyword of the setting to the declaration (a keyword added to fit
        # later is checked too)
        assert keywords - CONTROLS <= set(spy.asked[0]), (name, keywords - set(spy.asked[0]))
        if spy.has_compiled:
            assert spy.compiled_runs == (0 if missing or not compiled.available() else 1)
        assert _same_result(ref, got), (name, p.name, v)
        kind = "before" if p.name not in args else ("numpy" if missing else "compiled")
        outcome.setdefault(p.name, set()).add(kind)
    # every parameter accounted for (a) at every value tried
    assert set(outcome) == {p.name for p in spec.config_params}


@pytest.mark.parametrize("name", WITH_COMPILED)
def test_a_key_not_declared_runs_numpy_with_a_note(name, monkeypatch, capsys):
    """Each key taken out of the compiled declaration in turn (as a key added later that no one
    declared): ``fit`` runs the numpy pass for it, the same numbers, with a note naming it."""
    spec = LEARNERS[name]
    declared = spec.implements["compiled"]
    module = inspect.getmodule(spec.fit)
    global_name = next(k for k, o in vars(module).items() if o is declared)
    X, y, fmap = _data()
    h = next(s for *_, s in settings(spec))
    args = _args(spec, h)
    for key in sorted(set(declared.values) & set(args)):
        reduced = Implements({k: v for k, v in declared.values.items() if k != key})
        with monkeypatch.context() as mp:
            mp.setattr(module, global_name, reduced)
            spy = Spy(mp, spec)
            got = spec.fit(X, y, fmap, np.random.default_rng(3), **args)
        assert spy.answers == [False] and spy.compiled_runs == 0, key
        ref = spec.fit(X, y, fmap, NumpyOnly(np.random.PCG64(3)), **args)
        assert _same_result(ref, got)
        assert f"not implemented by the compiled pass of {name}" in capsys.readouterr().err


def test_implemented_refuses_a_key_it_does_not_name():
    """An undeclared key is not implemented at any value; a declared one at its values only;
    the controls (deadline, threads) are every pass's."""
    notes: list[str] = []
    declared = Implements({"eta": ANY, "solver": ("sgd",), "k": lambda k: k < 4})
    assert compiled.implemented("x", declared, {"eta": 0.3, "k": 2, "deadline": 1.0}, notes.append)
    assert not compiled.implemented("x", declared, {"eta": 0.3, "loss": "square"}, notes.append)
    assert notes and "loss" in notes[0] and "'square'" in notes[0] and "x" in notes[0]
    assert declared.missing({"solver": "ridge", "k": 5, "threads": 2}) == [
        ("solver", "ridge"),
        ("k", 5),
    ]
    assert not Implements({"average": (False,)}).accepts("average", 0)  # a bool is not a number
    assert NOTHING.missing({"eta": 0.1}) == [("eta", 0.1)]


# ----------------------------------------------------------------------------------------------
# the jax pass


def _jax_problems(spec: LearnerSpec, given: dict) -> list[tuple[str, str]]:
    cfg = tiny_config(methods={spec.name: dict(given)}, feature_map={"kind": "relu"}, engine="jax")
    try:
        C.resolve(cfg)
    except ConfigError as err:
        return err.problems
    return []


def _run_jax(spec: LearnerSpec, args: dict, X: np.ndarray, y: np.ndarray, fmap):
    """One cell of the learner's jax pass on ``(X, y)``: a batch of one (the engine's runner
    stacks a wave's data the same way, ``jax_runner._stack``)."""
    from ilnrun.engines.jax_runner import WIDTH_QUANTUM, run_batch

    jaxmod = spec.engine("jax")
    width = WIDTH_QUANTUM * math.ceil(D / WIDTH_QUANTUM)
    Xp = np.zeros((1, T, width))
    Xp[0, :, :D] = X
    data = {"X": Xp, "y": y[None], "fmap": {k: np.array([v]) for k, v in fmap.jax_params().items()}}
    if spec.needs_kernel:
        data["K"] = fmap.kernel(X, X)[None]
    cells = {k: np.stack([v]) for k, v in jaxmod.inputs(args, T).items()}
    cells["inst"] = np.zeros(1, dtype=np.int64)
    cells["key"] = np.array([[0, 7]], dtype=np.uint32)
    st = jaxmod.static(args)
    (out,) = run_batch(jaxmod, st, T, width, type(fmap), data, cells)
    return jaxmod.result(st, args, out, fmap, T)


@pytest.mark.parametrize("name", WITH_JAX)
def test_jax_pass_runs_what_it_declares_and_is_refused_the_rest(name):
    """For every parameter and representative value: a setting the jax pass declares validates
    on the jax engine and runs there (jax installed: every round, the numpy pass's evaluation
    counts, and a value that changes the numpy pass's result changes the jax pass's too: it is
    not ignored); one outside its declaration is refused at validation, the key named."""
    spec = LEARNERS[name]
    X, y, fmap = _data()
    outcome: dict[str, set[str]] = {}
    runs: dict[str, list] = {}
    for p, v, given, h in settings(spec):
        args = _args(spec, h)
        missing = spec.unimplemented("jax", args)
        keys = {k for k, _ in _jax_problems(spec, given)}
        assert keys == {f"methods.{name}.{k}" for k, _ in missing}, (p.name, v, keys)
        if not missing and HAS_JAX:
            res = _run_jax(spec, args, X, y, fmap)
            ref = spec.fit(X, y, fmap, np.random.default_rng(1), **args)
            if not (res.diverged or ref.diverged):
                assert len(res.losses) == T and np.all(np.isfinite(res.losses))
                for c in ("train_evals", "features_sampled", "kernel_evals"):
                    assert res.counters[c] == ref.counters[c], (p.name, v, c)
            runs.setdefault(p.name, []).append((v, args, ref, res))
        kind = "before" if p.name not in args else ("refused" if missing else "jax")
        outcome.setdefault(p.name, set()).add(kind)
    assert set(outcome) == {p.name for p in spec.config_params}
    defaults = {q.name: q.default for q in spec.config_params}
    for key, tried in runs.items():
        base = next((r for r in tried if r[0] == defaults[key]), None)
        for v, args, ref, res in tried if base is not None else []:
            if args != base[1] and not _same_result(ref, base[2]):  # numpy's result moves
                assert not _same_result(res, base[3]), f"{name}: the jax pass ignores {key}={v!r}"
                CHANGED.append((name, key, v))


CHANGED: list = []  # (learner, key, value) whose jax results the test compared (see above)


@pytest.mark.parametrize("name", WITH_JAX)
def test_a_parameter_no_pass_declares_is_refused_on_the_jax_engine(name, monkeypatch, tmp_path):
    """The reviewer's case: a parameter (a ``margin``, say; it was a ``loss`` before losses were
    a plugin kind, declared by every pass) added to a learner's spec and to nothing else.
    Where it reaches the passes (a ``fit`` keyword), ``--engine jax`` refuses it at every value,
    its default too (exit status 2, learner, key and value named); the numpy engine accepts
    it."""
    spec = LEARNERS[name]
    loss = Param("margin", "str", "square", "a margin", choices=("square", "hinge"))
    monkeypatch.setitem(LEARNERS, name, dataclasses.replace(spec, params=(*spec.params, loss)))
    for value in loss.choices:
        h = C.method_grid(name, _section(LEARNERS[name], {"margin": value}))[0]
        if "margin" not in _args(LEARNERS[name], h):
            continue  # resolved before any pass by the learner's arguments hook
        problems = dict(_jax_problems(LEARNERS[name], {"margin": value}))
        assert f"methods.{name}.margin" in problems, problems
        assert repr(value) in problems[f"methods.{name}.margin"]
        cfg = tiny_config(methods={name: {"margin": value}}, feature_map={"kind": "relu"})
        path = write_config(tmp_path / f"{value}.yaml", cfg)
        assert invoke(["validate", path]).exit_code == 0
        out = refused(
            invoke(["validate", path, "--set", "engine=jax"]), f"methods.{name}.margin", name
        )
        assert "jax pass" in out


@pytest.mark.parametrize("name", WITH_COMPILED)
def test_validate_notes_the_settings_that_run_as_numpy_code(name, monkeypatch, tmp_path):
    """``ilnrun validate`` names the settings a compiled pass leaves to the numpy code (none with
    the built-in declarations), with the learner, key and value."""
    spec = LEARNERS[name]
    path = write_config(tmp_path / "c.yaml", tiny_config(methods={name: {}}))
    res = invoke(["validate", path])
    assert res.exit_code == 0 and "compiled pass" not in res.output, res.output
    h = next(s for *_, s in settings(spec))
    key = next(k for k in _args(spec, h) if k in spec.implements["compiled"].values)
    declared = spec.implements["compiled"].values
    reduced = Implements({k: v for k, v in declared.items() if k != key})
    changed = dataclasses.replace(spec, implements={**spec.implements, "compiled": reduced})
    monkeypatch.setitem(LEARNERS, name, changed)
    res = invoke(["validate", path])
    assert res.exit_code == 0, res.output
    assert f"not implemented by the compiled pass of {name}" in res.output
    assert f"no {key}" in res.output and "run as numpy code" in res.output
