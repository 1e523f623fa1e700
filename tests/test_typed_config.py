"""The resolved config's frozen parts (ilnrun.config.typed; docs/architecture.md §2): what
validation returns, what the cell and the engines read, and the dict form kept for
``config.yaml``, resumes and record digests."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from conftest import tiny_config

from ilnrun import config as C
from ilnrun.config.grid import digest


def test_resolve_returns_frozen_parts_that_match_the_dict_form():
    exp = C.resolve(tiny_config(**{"budget.dsgd_k": [1, 3], "evaluation.n_test_estimated": 7}))
    raw = exp.as_dict()
    assert isinstance(exp, C.Experiment) and isinstance(raw, dict)
    assert exp.budget == C.BudgetConfig(match=raw["budget"]["match"], per_round=(1, 3))
    assert exp.evaluation.m_test == raw["evaluation"]["m_test"]
    assert exp.evaluation.n_estimated(100) == 7 and exp.evaluation.n_estimated(5) == 5
    assert exp.limits.cell_timeout_s == raw["limits"]["cell_timeout_s"]
    assert exp.feature_map.kind == raw["feature_map"]["kind"] == exp["feature_map"]["kind"]
    assert exp.dataset.kind == raw["dataset"]["kind"]
    assert (exp.name, exp.seed, exp.repetitions, exp.engine) == (
        raw["name"],
        raw["seed"],
        raw["repetitions"],
        raw["engine"],
    )
    assert dict(exp.methods) == raw["methods"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        exp.seed = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        exp["seed"] = 1  # type: ignore[index]
    assert yaml.safe_load(C.dump(exp)) == raw  # config.yaml is the dict form


def test_a_single_budget_is_a_one_value_axis():
    assert C.resolve(tiny_config(**{"budget.dsgd_k": 2})).budget.per_round == (2,)


def test_record_digest_hashes_the_dict_form():
    """The digest is the one of the dict-based code it replaced: key, root seed, feature map,
    budget convention, evaluation settings, data and engine (resumes keep working)."""
    exp = C.resolve(tiny_config())
    raw = exp.as_dict()
    cell = C.cells(exp)[0]
    expected = digest(
        {
            "key": cell.key,
            "seed": raw["seed"],
            "feature_map": raw["feature_map"],
            "match": raw["budget"]["match"],
            "evaluation": raw["evaluation"],
            # target_seed and noise were added in 0.2.0 (Param.since): left out at their
            # key_omit, None and 0.0
            "data": {
                k: v
                for k, v in cell.data.items()
                if not (k == "target_seed" and v is None) and not (k == "noise" and v == 0.0)
            },
            "engine": raw.get("engine", "numpy"),
        }
    )
    assert C.record_digest(exp, cell) == expected
    assert cell.key["dsgd_k"] == cell.per_round  # the key keeps the YAML key's name
