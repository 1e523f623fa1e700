"""The engine is checked at validation (docs/architecture.md §8): ``--engine jax`` with a feature
map that has no jax twin is refused with exit status 2 naming the map; a learner without a jax
pass is accepted (it runs its numpy ``fit``). Needs no JAX: the refusal comes first."""

from __future__ import annotations

import pytest
from conftest import invoke, tiny_config, write_config

from ilnrun import config as C
from ilnrun.config.schema import has_jax_twin
from ilnrun.features import FEATURE_MAPS, Coordinate, FeatureMap


class NoTwin(Coordinate):
    """Coordinate features without a jax twin (the base class's methods)."""

    name = "no_twin"
    jax_sample = FeatureMap.__dict__["jax_sample"]
    jax_point = FeatureMap.__dict__["jax_point"]
    jax_pairs = FeatureMap.__dict__["jax_pairs"]


@pytest.fixture
def no_twin(monkeypatch):
    monkeypatch.setitem(FEATURE_MAPS, NoTwin.name, NoTwin)
    return NoTwin


# built-in maps without a jax twin, refused on the jax engine by this check: random_net (its
# hidden width h fixes the shapes of the draws, which the jax programs take as traced numbers)
WITHOUT_TWIN = {"random_net"}
TWIN = ("jax_sample", "jax_point", "jax_pairs")


def test_a_map_has_its_whole_jax_twin_or_none_and_the_check_sees_a_missing_one(no_twin):
    """A contract every registered map meets (a new one too): it overrides all three methods of
    the twin or none (half a twin would be refused as none); of the built-in maps, exactly
    ``WITHOUT_TWIN`` have none."""
    for name, cls in FEATURE_MAPS.items():
        own = {m for m in TWIN if getattr(cls, m).__func__ is not getattr(FeatureMap, m).__func__}
        assert own in (set(), set(TWIN)), (name, own)
        assert has_jax_twin(cls) == bool(own), name
    built_in = {n: c for n, c in FEATURE_MAPS.items() if c.__module__ == "ilnrun.features"}
    assert {n for n, c in built_in.items() if not has_jax_twin(c)} == WITHOUT_TWIN
    assert not has_jax_twin(NoTwin)


def _cfg(engine: str, methods: dict) -> dict:
    cfg = tiny_config(methods=methods, engine=engine)
    cfg["feature_map"] = {"kind": NoTwin.name}
    return cfg


def test_a_map_without_a_jax_twin_is_refused_on_the_jax_engine(no_twin):
    with pytest.raises(C.ConfigError) as err:
        C.resolve(_cfg("jax", {"shrinking_gradient": {"eta": 0.3}}))
    assert "feature_map.kind" in str(err.value) and "'no_twin' has no jax twin" in str(err.value)
    C.resolve(_cfg("numpy", {"shrinking_gradient": {"eta": 0.3}}))  # numpy: fine
    C.resolve(_cfg("jax", {"kernel_ridge": {}}))  # no learner with a jax pass: fine


def test_engine_jax_on_the_command_line_is_refused_with_exit_2(no_twin, tmp_path):
    path = write_config(tmp_path / "c.yaml", _cfg("numpy", {"doubly_sgd": {"eta": 0.3}}))
    out = tmp_path / "out"
    res = invoke(["run", path, "--out", out, "--engine", "jax", "-q"])
    assert res.exit_code == 2, res.output
    assert "no_twin" in res.output and "Traceback" not in res.output
    assert not out.exists()
