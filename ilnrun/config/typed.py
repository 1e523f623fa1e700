"""The resolved config as frozen parts (docs/architecture.md §2).

:func:`ilnrun.config.schema.resolve` validates a YAML mapping and returns an :class:`Experiment`:
one frozen dataclass per section, so a function takes the part it uses (the budget, the
evaluation settings, the limits, ...) and its signature says which. The YAML format, the key
paths and the messages are the schema's; these classes only carry the resolved values.

The dict form is kept exactly as resolved (:meth:`Experiment.as_dict`, also the read-only
mapping view ``exp["budget"]["match"]``): it is what ``config.yaml`` holds, what a resume
compares and what record digests hash, so cell ids, digests and tables do not depend on these
classes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


def _freeze(d: Mapping) -> dict:
    """A copy of a section (a plain dict, so that the experiment pickles to worker processes and
    digests as JSON; never mutated)."""
    return dict(d)


@dataclass(frozen=True)
class BudgetConfig:
    """``budget``: the convention ``match`` (``evaluations`` or ``samples``) and the budget in
    features per round, ``per_round`` (the YAML key ``dsgd_k``: Doubly SGD's ``k``, the unit the
    budget is stated in; docs/budgets.md). Several values are an axis of the experiment."""

    match: str
    per_round: tuple[int, ...]

    @classmethod
    def from_dict(cls, d: Mapping) -> BudgetConfig:
        k = d["dsgd_k"]
        return cls(match=d["match"], per_round=tuple(k) if isinstance(k, list) else (k,))


@dataclass(frozen=True)
class EvaluationConfig:
    """``evaluation``: Algorithm-2 samples ``m_test`` (an integer or a rule:
    :func:`ilnrun.config.keys.m_test_value`) and test points ``n_test_estimated`` of the
    estimated test loss, the regret radius ``regret_B`` (``None``: no regret), the learning
    curve's ``curve_points``, the protocol ``kernel`` (``exact`` or ``free``), the
    Algorithm-2 ``m_test_sweep`` and the random stream of every Algorithm-2 estimate
    ``estimate_draws`` (``ilnrun.learners.estimate_draws``)."""

    m_test: int | str | Mapping
    n_test_estimated: int | str
    regret_B: float | None
    curve_points: int
    raw: dict
    select_on: str | Mapping = "exact"
    kernel: str = "exact"
    m_test_sweep: tuple[int, ...] = ()
    estimate_draws: str = "multinomial"

    @classmethod
    def from_dict(cls, d: Mapping) -> EvaluationConfig:
        return cls(
            m_test=d["m_test"],
            n_test_estimated=d["n_test_estimated"],
            regret_B=d["regret_B"],
            curve_points=d["curve_points"],
            raw=_freeze(d),
            select_on=d.get("select_on", "exact"),
            kernel=d.get("kernel", "exact"),
            m_test_sweep=tuple(d.get("m_test_sweep") or ()),
            estimate_draws=d.get("estimate_draws", "multinomial"),
        )

    @property
    def free(self) -> bool:
        """Whether no closed-form kernel value may be computed (``kernel: free``)."""
        return self.kernel == "free"

    def selects_on(self, method: str, estimated_validation: bool) -> str:
        """``exact`` or ``estimated``: what ``method``'s settings are selected on
        (docs/protocol.md §5.2). ``estimated`` applies only to a learner with an Algorithm-2
        validation loss (``estimated_validation``); every other learner selects on its
        ``val_loss``."""
        return select_mode(self.select_on, method, estimated_validation)

    def numbers(self) -> dict:
        """The settings that change a cell's numbers (the record digest's): ``select_on``
        changes only which setting is called selected, so it is left out."""
        return {k: v for k, v in self.raw.items() if k != "select_on"}

    def n_estimated(self, n: int) -> int:
        """How many of ``n`` test points ``test_loss_estimated`` uses (the first ones)."""
        return n if self.n_test_estimated == "all" else min(int(self.n_test_estimated), n)

    def as_dict(self) -> dict:
        return dict(self.raw)


def select_mode(select_on: str | Mapping, method: str, estimated_validation: bool) -> str:
    """What ``method`` is selected on under ``evaluation.select_on`` (a mode for every learner,
    or a mapping learner -> mode, ``exact`` for learners it does not name)."""
    mode = select_on.get(method, "exact") if isinstance(select_on, Mapping) else select_on
    return mode if estimated_validation else "exact"


@dataclass(frozen=True)
class LimitsConfig:
    """``limits``: a cell's training time ``cell_timeout_s`` (``None``: none), the refusal
    thresholds ``max_cells`` and ``max_memory_gb``."""

    cell_timeout_s: float | None
    max_cells: int
    max_memory_gb: float | None

    @classmethod
    def from_dict(cls, d: Mapping) -> LimitsConfig:
        return cls(d["cell_timeout_s"], d["max_cells"], d["max_memory_gb"])


@dataclass(frozen=True)
class FeatureMapConfig:
    """``feature_map``: its ``kind`` and resolved parameters (the map's class builds itself from
    :meth:`as_dict`)."""

    kind: str
    raw: dict

    @classmethod
    def from_dict(cls, d: Mapping) -> FeatureMapConfig:
        return cls(kind=d["kind"], raw=_freeze(d))

    def as_dict(self) -> dict:
        return dict(self.raw)


@dataclass(frozen=True)
class DatasetConfig:
    """``dataset``: its ``kind`` and parameters as resolved (a list is an axis unless the
    parameter takes a list as one value; :func:`ilnrun.config.grid.dataset_settings`)."""

    kind: str
    raw: dict

    @classmethod
    def from_dict(cls, d: Mapping) -> DatasetConfig:
        return cls(kind=d["kind"], raw=_freeze(d))

    def as_dict(self) -> dict:
        return dict(self.raw)


@dataclass(frozen=True, eq=False)
class Experiment(Mapping):
    """A validated, resolved config: its parts, and the dict form it was resolved to (``raw``,
    read through the mapping interface or :meth:`as_dict`)."""

    name: str
    description: str
    seed: int
    repetitions: int
    dataset: DatasetConfig
    feature_map: FeatureMapConfig
    budget: BudgetConfig
    evaluation: EvaluationConfig
    limits: LimitsConfig
    methods: Mapping  # learner name -> its resolved parameters (lists are grids; edges_ok, when
    # given, is a mapping parameter -> reason, no parameter: ilnrun.config.keys.grid_params)
    engine: str
    raw: dict
    # the experiment's loss (``loss``; each learner's own is in its section of ``methods``)
    loss: str = "square"

    @classmethod
    def from_dict(cls, d: dict) -> Experiment:
        return cls(
            name=d["name"],
            description=d["description"],
            seed=d["seed"],
            repetitions=d["repetitions"],
            dataset=DatasetConfig.from_dict(d["dataset"]),
            feature_map=FeatureMapConfig.from_dict(d["feature_map"]),
            budget=BudgetConfig.from_dict(d["budget"]),
            evaluation=EvaluationConfig.from_dict(d["evaluation"]),
            limits=LimitsConfig.from_dict(d["limits"]),
            methods=_freeze(d["methods"]),
            engine=d.get("engine", "numpy"),
            raw=_freeze(d),
            loss=d.get("loss", "square"),
        )

    def as_dict(self) -> dict:
        """The resolved config as a plain mapping (what ``config.yaml`` holds; a copy)."""
        return copy.deepcopy(self.raw)

    # the read-only mapping view of the dict form (tables, figures and the report read it)
    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.raw) == dict(other)

    __hash__ = None  # type: ignore[assignment]
