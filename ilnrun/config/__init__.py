"""YAML experiment spec -> validated, resolved config -> cells (docs/architecture.md §2).

- :mod:`ilnrun.config.schema`: the config's keys, their validation (every problem reported with
  its key path, before any cell runs) and the resolved config with every default filled in;
- :mod:`ilnrun.config.typed`: the resolved config as frozen parts (:class:`Experiment`);
- :mod:`ilnrun.config.grid`: the cells of a resolved config, their keys and seeds.

Grids: under ``dataset`` and ``budget.dsgd_k`` a list is an *axis* of the experiment (each value
is a separate dataset setting / budget); under ``methods`` a list is a hyperparameter *grid*,
searched and selected on validation loss.
"""

from ..params import ConfigError, Param
from .grid import (
    Cell,
    axes,
    cells,
    dataset_settings,
    digest,
    method_grid,
    record_digest,
    seed_sequence,
)
from .schema import TOP_LEVEL, dump, load, load_yaml, resolve
from .typed import (
    BudgetConfig,
    DatasetConfig,
    EvaluationConfig,
    Experiment,
    FeatureMapConfig,
    LimitsConfig,
)

__all__ = [
    "BudgetConfig",
    "Cell",
    "DatasetConfig",
    "EvaluationConfig",
    "Experiment",
    "FeatureMapConfig",
    "LimitsConfig",
    "ConfigError",
    "Param",
    "TOP_LEVEL",
    "axes",
    "cells",
    "dataset_settings",
    "digest",
    "dump",
    "load",
    "load_yaml",
    "method_grid",
    "record_digest",
    "resolve",
    "seed_sequence",
]
