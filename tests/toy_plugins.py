"""The four worked examples of docs/architecture.md §4–§6.1 (``toy_learner``, ``toy_feature_map``,
``toy_dataset``, ``toy_loss``) registered together, each by its one registry line, so that the
plugin-contract tests — the tests that iterate over ``LEARNERS``, ``FEATURE_MAPS``, ``DATASETS``
and ``LOSSES`` — run over a correct new plugin of every kind as well as over the built-ins
(issue 27, Deliver 7: no test may assume that a registry holds only the built-ins).

Two ways in:

- ``ILNRUN_TOY_PLUGINS=1 pytest ...`` (``make test-plugins``): ``tests/conftest.py`` calls
  :func:`register` when it is imported, before any test module is collected, so every
  parametrisation over a registry, and every estimator class built from the registries, includes
  the toys for the whole run;
- ``register(monkeypatch.setitem)`` inside one test: the toys for that test only
  (``tests/test_toy_plugins.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import toy_dataset
import toy_feature_map
import toy_learner
import toy_loss

from ilnrun.datasets import DATASETS
from ilnrun.features import FEATURE_MAPS
from ilnrun.learners import LEARNERS
from ilnrun.losses import LOSSES

ENV = "ILNRUN_TOY_PLUGINS"  # "1": register the toys for the whole pytest run

LEARNER = toy_learner.SPEC
FEATURE_MAP = toy_feature_map.ToySign
DATASET = toy_dataset.SPEC
LOSS = toy_loss.SPEC


def enabled() -> bool:
    """Whether this pytest run registers the toys for every test (``ILNRUN_TOY_PLUGINS=1``)."""
    return os.environ.get(ENV, "") == "1"


def register(setitem: Callable[[dict, str, object], None] | None = None) -> None:
    """Add the toy learner, feature map, dataset and loss to the registries, each by the line a
    contributor adds (docs/architecture.md §4–§6.1). ``setitem`` (``monkeypatch.setitem``) undoes
    it at the end of a test; without it, the toys stay registered for the process."""

    def put(registry: dict, key: str, value: object) -> None:
        registry[key] = value

    put = setitem or put
    put(LEARNERS, LEARNER.name, LEARNER)
    put(FEATURE_MAPS, FEATURE_MAP.name, FEATURE_MAP)
    put(DATASETS, DATASET.name, DATASET)
    put(LOSSES, LOSS.name, LOSS)
