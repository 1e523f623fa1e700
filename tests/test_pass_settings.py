"""A learner's parameters are stated once: in its spec's ``params``. Its passes (``fit``,
``fit_compiled``, ``fit_numpy``, ..., the jax pass's ``static`` and ``inputs``) share one settings
object derived from them (:func:`ilnrun.learners.base.pass_settings`), so no pass restates a
keyword or a default (docs/architecture.md §4, "A learner with several passes")."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from ilnrun.learners import LEARNERS
from ilnrun.learners.base import DEADLINE, LOSS, THREADS, PassSettings, pass_settings
from ilnrun.params import Param

HEAD = ["X", "y", "fmap", "rng"]
# ``fit`` keywords that are not config keys of a learner (its loss, how a pass runs) and the
# research switches a learner declares as extra ``Param``s of its settings
NOT_CONFIG_KEYS = {LOSS.name, DEADLINE.name, THREADS.name}


def _module(spec):
    return inspect.getmodule(spec.fit)


def _settings(spec) -> type[PassSettings] | None:
    return getattr(spec.fit, "Settings", None)


WITH_SETTINGS = [n for n, s in LEARNERS.items() if _settings(s) is not None]


def test_the_online_learners_derive_their_settings():
    assert {"shrinking_gradient", "doubly_sgd", "fixed_random", "kernel_ogd"} <= set(WITH_SETTINGS)


@pytest.mark.parametrize("name", WITH_SETTINGS)
def test_settings_are_derived_from_the_spec(name):
    """Every field is the budget size, one of the spec's params (with its declared default), or
    an extra ``Param`` of the settings (the loss, the deadline, a research switch): nothing is
    declared a second time with another default."""
    spec = LEARNERS[name]
    Settings = _settings(spec)
    declared = {p.name: p for p in spec.params}
    extras = {p.name: p for p in Settings.PARAMS if p.name not in declared}
    size = spec.budget.name if spec.budget is not None else None
    assert size == Settings.SIZE
    for f in dataclasses.fields(Settings):
        if f.name == size:
            assert f.default is dataclasses.MISSING  # a size is always given
            continue
        p = declared.get(f.name) or extras.get(f.name)
        assert p is not None, (name, f.name)
        assert f.default == p.default, (name, f.name, f.default, p.default)
    # every param reaches the passes, or the spec's arguments hook resolves it first
    fields = {f.name for f in dataclasses.fields(Settings)}
    for p in spec.params:
        assert p.name in fields or spec.arguments is not None, (name, p.name)
    assert DEADLINE.name in fields
    # the public fit's keywords are exactly the settings (what the contract tests read)
    sig = inspect.signature(spec.fit).parameters
    assert list(sig)[:4] == HEAD
    assert set(list(sig)[4:]) == fields


@pytest.mark.parametrize("name", WITH_SETTINGS)
def test_no_pass_restates_a_keyword(name):
    """Every function of the learner's module that runs a pass (``(X, y, fmap, rng, ...)``) takes
    the settings object: none has keywords of its own, so none can drift from the spec."""
    spec = LEARNERS[name]
    Settings = _settings(spec)
    module = _module(spec)
    passes = []
    for attr, fn in vars(module).items():
        if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
            continue
        params = list(inspect.signature(fn).parameters)
        if params[:4] != HEAD:
            continue
        passes.append(attr)
        assert getattr(fn, "Settings", None) is Settings, (
            f"{name}.{attr} runs a pass with keywords of its own: decorate it with "
            "@Settings.takes and read them from the settings object"
        )
    assert "fit" in passes


@pytest.mark.parametrize("name", WITH_SETTINGS)
def test_the_jax_pass_reads_the_settings(name):
    """The jax pass reads the settings object, not the ``args`` dict with defaults of its own:
    a setting with its defaults left out gives the same program and numbers as one that spells
    them out."""
    spec = LEARNERS[name]
    if "jax" not in spec.engines:
        pytest.skip("no jax pass")
    mod = pytest.importorskip("jax") and spec.engine("jax")
    for fn in (mod.static, mod.inputs):
        source = inspect.getsource(fn)
        assert "args.get(" not in source and "args[" not in source, (name, fn.__name__)
    Settings = _settings(spec)
    short = {Settings.SIZE: 3} if Settings.SIZE else {}
    full = {k: v for k, v in Settings(**short).keywords().items() if k not in NOT_CONFIG_KEYS}
    assert mod.static(short) == mod.static(full)
    a, b = mod.inputs(short, 10), mod.inputs(full, 10)
    assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_settings_refuse_an_undeclared_keyword_and_need_the_size():
    Settings = pass_settings(
        "toy", (Param("tail", "float", 0.5, "tail", key_omit=0.5),), size="q", extra=(LOSS,)
    )
    assert Settings(q=2).keywords() == {"q": 2, "tail": 0.5, "loss": "square", "deadline": None}
    with pytest.raises(TypeError, match="talk"):
        Settings(q=2, talk=0.1)
    with pytest.raises(TypeError, match="q"):
        Settings(tail=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings(q=2).tail = 0.1  # type: ignore[misc]

    @Settings.takes
    def run(X, y, fmap, rng, hp):
        return hp

    assert list(inspect.signature(run).parameters) == [*HEAD, "q", "tail", "loss", "deadline"]
    hp = run(None, None, None, None, q=3)
    assert hp == Settings(q=3) and run(None, None, None, None, hp, tail=0.25).tail == 0.25
    with pytest.raises(ValueError, match="resolved"):
        pass_settings("toy", (), resolved=("preset",))
    with pytest.raises(ValueError, match="twice"):
        pass_settings("toy", (LOSS,), extra=(LOSS,))
