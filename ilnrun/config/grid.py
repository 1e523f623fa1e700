"""The cells of a resolved config, their keys and seeds (docs/architecture.md §2).

A cell is one (dataset setting, repetition, learner, hyperparameter setting[, budget]). Its
**key** identifies it and seeds it (less ``average``, which chooses the predictor a pass returns,
not its draws: :attr:`Cell.seed_key`); the key depends only on the resolved config: hyperparameters
that a setting does not use (``None``) and values equal to their parameter's frozen ``key_omit``
are left out (see :class:`ilnrun.params.Param`), so adding an optional parameter with a
``key_omit`` equal to its introduced default changes no existing cell, and changing a default in
code changes the resolved config (a resume is then refused), never a cell's identity.

A file named in the config is identified in the key by its content (SHA-256), not its path:
the same data give the same cells wherever the file lies, and changed data give new cells.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..datasets import DATASETS
from ..learners import LEARNERS
from ..learners.base import SEED_FREE
from ..params import NEVER, ONE_VALUE_LISTS, key_part
from .keys import grid_params
from .typed import Experiment


def digest(obj: Any) -> str:
    """Stable hex digest of a JSON-able object (sorted keys)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def spawn_key(key: dict) -> tuple[int, ...]:
    """``H(key)``: the first 128 bits of SHA-256 of the key's canonical JSON, as four 32-bit
    integers (the ``spawn_key`` of :func:`seed_sequence`)."""
    h = digest(key)
    return tuple(int(h[i : i + 8], 16) for i in range(0, 32, 8))


def seed_sequence(root: int, key: dict) -> np.random.SeedSequence:
    """``SeedSequence(root, spawn_key=H(key))`` (:func:`spawn_key`): a cell's (or a dataset
    instance's) randomness depends on nothing but the root seed and its key — not on workers,
    backend or order."""
    return np.random.SeedSequence(root, spawn_key=spawn_key(key))


def as_list(v: Any) -> list:
    """``v`` itself if it is a list, else ``[v]``."""
    return v if isinstance(v, list) else [v]


@dataclass(frozen=True)
class Cell:
    """One (dataset setting, repetition, method, hyperparameter setting[, budget])."""

    index: int
    data: dict  # resolved dataset setting, all scalars (kind + params)
    rep: int
    method: str
    hyper: dict  # hyperparameters of this grid point (``None``: unused by this setting)
    per_round: int | None  # the budget axis: features per round (``budget.dsgd_k``); None
    # for settings that take no size from the budget
    data_id: dict | None = None  # the dataset setting as identified in keys (files by content)

    @property
    def data_key(self) -> dict:
        return {"data": self.data if self.data_id is None else self.data_id, "rep": self.rep}

    @property
    def key(self) -> dict:
        """What identifies the cell (and seeds it). Not kept on the cell: a run's process holds
        every cell, and needs only their :attr:`id` (kept)."""
        hyper = key_part(LEARNERS[self.method].params, self.hyper)
        # the budget's entry keeps the YAML key's name: cell identities never move
        return {**self.data_key, "method": self.method, "hyper": hyper, "dsgd_k": self.per_round}

    @property
    def seed_key(self) -> dict:
        """What seeds the cell: its key without the parameters that choose which predictor a
        pass returns, not what it draws (``SEED_FREE``: ``average``), so that an averaged cell
        makes the draws, pass and online losses of its ``average: false`` twin (equal to
        :attr:`key` for every cell that does not set them)."""
        key = self.key
        if not SEED_FREE & key["hyper"].keys():
            return key
        return {**key, "hyper": {k: v for k, v in key["hyper"].items() if k not in SEED_FREE}}

    @cached_property
    def seed_spawn_key(self) -> tuple[int, ...]:
        """``H(seed_key)`` (:func:`spawn_key`): the cell's seed sequence is
        ``SeedSequence(root, spawn_key=seed_spawn_key)`` for every root seed, and its ``i``-th
        child ``SeedSequence(root, spawn_key=(*seed_spawn_key, i))`` (what ``spawn`` makes), so
        the digest is taken once per cell, not once per seed (:func:`ilnrun.cell.seeds`; kept:
        four integers)."""
        return spawn_key(self.seed_key)

    @cached_property
    def id(self) -> str:
        """The first 20 hex digits of the key's digest (computed once per cell object: the
        fields of a cell are never changed after the grid is built)."""
        return digest(self.key)[:20]


# The jax engine's random-stream layout (0.2.0: inputs padded to a multiple of 8 columns, was
# 128): part of a jax record's digest, so records drawn with another layout are run again rather
# than mixed with new ones. The numpy engine's digests never carried it.
JAX_STREAMS = "streams-2"


def record_digest(exp: Experiment, cell: Cell) -> str:
    """Digest of everything that determines a cell's numbers: its key, the root seed, the
    feature map, the budget convention, the evaluation settings that change numbers (not
    ``select_on``) and the engine. A logged record
    whose digest differs belongs to another config and is never resumed.

    It is :func:`digest` of ``{"key": cell.key, "seed": ..., "feature_map": ..., "match": ...,
    "evaluation": ..., "data": ..., "engine": ...}``; the canonical JSON of that mapping is
    put together from the JSON of its entries (sorted keys nest: the same text), the entries
    that are the experiment's (:func:`_digest_frame`) rendered once per experiment."""
    middle, tail = _digest_frame(exp)
    data = _files_by_content(exp, _without_added(cell.data))
    text = (
        '{"data": '
        + json.dumps(data, sort_keys=True)
        + middle
        + json.dumps(cell.key, sort_keys=True)
        + tail
    )
    return hashlib.sha256(text.encode()).hexdigest()


_FRAME: tuple = (None, ("", ""))  # (experiment, its frame): the last one's, see _digest_frame


def _digest_frame(exp: Experiment) -> tuple[str, str]:
    """The JSON of the entries of :func:`record_digest`'s mapping that are the experiment's, in
    sorted key order around the cell's: ``(', "engine": ..., "evaluation": ...,
    "feature_map": ..., "key": ', ', "match": ..., "seed": ...}')`` (kept for the last
    experiment asked about: an experiment is never changed)."""
    global _FRAME
    last, frame = _FRAME  # one read: a thread that replaces it replaces the pair
    if last is exp:
        return frame

    def js(v: Any) -> str:
        return json.dumps(v, sort_keys=True)

    engine = exp.engine if exp.engine == "numpy" else f"{exp.engine}/{JAX_STREAMS}"
    middle = (
        f', "engine": {js(engine)}, "evaluation": {js(exp.evaluation.numbers())}, '
        f'"feature_map": {js(exp.feature_map.as_dict())}, "key": '
    )
    tail = f', "match": {js(exp.budget.match)}, "seed": {js(exp.seed)}}}'
    _FRAME = (exp, (middle, tail))
    return middle, tail


def _without_added(setting: dict) -> dict:
    """The dataset setting without the parameters added after 0.1.0 (``Param.since``) that are
    at their ``key_omit``: records written before they existed keep their digest."""
    spec = DATASETS.get(setting.get("kind"))
    added = {p.name: p.key_omit for p in spec.params if p.since} if spec else {}
    return {k: v for k, v in setting.items() if not (k in added and v == added[k])}


def _files_by_content(cfg: Mapping, setting: dict) -> dict:
    """The setting with each data file's path replaced by its content digest (the setting itself
    when it names no file): a file moved or renamed with the same bytes changes no record."""
    files = cfg.get("inputs", {})
    if not any(isinstance(v, str) and v in files for v in setting.values()):
        return setting
    return {
        k: files[v]["sha256"] if isinstance(v, str) and v in files else v
        for k, v in setting.items()
    }


def _is_axis(kind: str, key: str, value: Any) -> bool:
    """A list under ``dataset`` is an axis unless its parameter takes a list as one value."""
    types = {p.name: p.type for p in DATASETS[kind].params}
    return isinstance(value, list) and types.get(key) not in ONE_VALUE_LISTS


def axes(cfg: Mapping) -> list[str]:
    """Names of the dataset keys that vary (lists) — the experiment's dataset axes."""
    ds = cfg["dataset"]
    return [k for k, v in ds.items() if k != "kind" and _is_axis(ds["kind"], k, v)]


def dataset_settings(cfg: Mapping) -> list[dict]:
    """Every combination of the dataset axes, each a mapping of scalars (kind + params)."""
    ds = cfg["dataset"]
    keys = list(ds)
    values = [ds[k] if k != "kind" and _is_axis(ds["kind"], k, ds[k]) else [ds[k]] for k in keys]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


def data_identity(cfg: Mapping, setting: dict) -> dict | None:
    """The setting as identified in cell keys: a file path replaced by its content digest
    (``None`` when the setting names no file, so today's keys are unchanged). Parameters equal
    to a frozen ``key_omit`` are left out."""
    params = DATASETS[setting["kind"]].params
    files = cfg.get("inputs", {})
    omit = {p.name: p.key_omit for p in params}
    if not any(p.type == "path" for p in params) and all(v is NEVER for v in omit.values()):
        return None
    out = {}
    for k, v in setting.items():
        if omit.get(k, NEVER) is not NEVER and v == omit[k]:
            continue
        out[k] = files[v]["sha256"] if isinstance(v, str) and v in files else v
    return out


def method_grid(spec_name: str, params: dict, skip: bool = True) -> list[dict]:
    """Expand a method's hyperparameter lists into settings; keys a setting does not use (the
    spec's ``unused``) are ``None`` and the duplicates this creates are dropped, and so are the
    settings the spec leaves out (its ``skip``; kept with ``skip=False``). Keys that are no
    parameter of a setting (``edges_ok``) are left out (:func:`~ilnrun.config.keys.grid_params`).

    The settings are new mappings at every call; the expansion itself is made once per learner
    and parameters (:func:`_expanded`: validation and ``ilnrun validate`` ask for a grid several
    times, and a grid of presets can be a product of thousands of combinations)."""
    spec = LEARNERS[spec_name]
    settings = _expanded(spec_name, params)
    if skip and spec.skip is not None:
        # ``skip`` and ``unused`` read a setting's values only: of equal settings, the first
        # is kept or left out as the others would be
        settings = [h for h in settings if not spec.skip(h)]
    return [dict(h) for h in settings]


# (learner, parameters' repr) -> (its spec, its settings): :func:`_expanded`'s last grids
_GRIDS: dict[tuple[str, str], tuple[Any, list[dict]]] = {}
_GRIDS_KEPT = 32


def _plain(v: Any) -> bool:
    """Whether ``v`` is made of YAML's plain values only (its ``repr`` then tells it apart)."""
    if v is None or type(v) in (str, int, float, bool):
        return True
    if type(v) in (list, tuple):
        return all(_plain(x) for x in v)
    if type(v) is dict:
        return all(type(k) is str and _plain(x) for k, x in v.items())
    return False


def _expanded(spec_name: str, params: dict) -> list[dict]:
    """Every combination of ``params``' lists with the spec's ``unused`` keys ``None``, each
    distinct setting once (compared as JSON, as ``json.dumps(h, sort_keys=True)`` compares
    them), in the order of the product. Kept for the last :data:`_GRIDS_KEPT` (learner,
    parameters); not to be changed by the caller."""
    spec = LEARNERS[spec_name]
    params = grid_params(params)
    # the parameters as written (their order is the product's, list and tuple differ), kept
    # only for plain values, whose text says all of them
    memo = (spec_name, repr(params)) if _plain(params) else None
    found = _GRIDS.get(memo) if memo is not None else None
    if found is not None and found[0] is spec:
        return found[1]
    unused = spec.unused
    keys = list(params)
    values = [as_list(params[k]) for k in keys]
    # a setting's signature: for each key (every setting has the same keys in the same order)
    # the first position in its list of a value of the same JSON, -1 for null: settings of the
    # same signature are those json.dumps(h, sort_keys=True) writes alike
    ids = []
    for vs in values:
        texts = [json.dumps(v, sort_keys=True) for v in vs]
        ids.append([-1 if t == "null" else texts.index(t) for t in texts])
    position = {k: j for j, k in enumerate(keys)}
    seen, out = set(), []
    for combo, sig in zip(itertools.product(*values), itertools.product(*ids), strict=True):
        h = dict(zip(keys, combo, strict=True))
        dropped = [key for key in unused(h) if key in h]
        if dropped:
            marks = list(sig)
            for key in dropped:
                h[key] = None
                marks[position[key]] = -1
            sig = tuple(marks)
        if sig not in seen:
            seen.add(sig)
            out.append(h)
    if memo is not None:
        if len(_GRIDS) >= _GRIDS_KEPT:
            del _GRIDS[next(iter(_GRIDS))]
        _GRIDS[memo] = (spec, out)
    return out


def cells(exp: Experiment) -> list[Cell]:
    """All cells, ordered so that cells sharing a dataset instance are consecutive."""
    out: list[Cell] = []
    budgets = exp.budget.per_round
    # each learner's settings, expanded once: its budgeted ones, then the others (the cells
    # share these mappings, as those of one dataset setting share its mapping; none changes them)
    grids: dict[str, tuple[list[dict], list[dict]]] = {}
    for method, params in exp.methods.items():
        settings, takes = method_grid(method, params), LEARNERS[method].takes_budget
        grids[method] = ([h for h in settings if takes(h)], [h for h in settings if not takes(h)])
    for data in dataset_settings(exp):
        data_id = data_identity(exp, data)
        for rep in range(exp.repetitions):
            for method, (budgeted, other) in grids.items():
                for k in budgets:
                    out += [
                        Cell(len(out) + i, data, rep, method, h, k, data_id)
                        for i, h in enumerate(budgeted)
                    ]
                out += [
                    Cell(len(out) + i, data, rep, method, h, None, data_id)
                    for i, h in enumerate(other)
                ]
    return out


def _is_key_omit(value: Any, omit: Any) -> bool:
    return value == omit or (isinstance(value, list) and len(value) == 1 and value[0] == omit)


def without_new_defaults(old: Mapping, new: dict) -> dict:
    """``new`` without the parameters that ``old`` does not record and whose value is their
    frozen ``key_omit`` — parameters added to a dataset, feature map or learner after ``old``
    was written, at the value that changes no cell — so that such results resume
    (docs/protocol.md §10). Compare ``old`` with the result."""
    from ..features import FEATURE_MAPS

    def strip(section: Any, before: Any, params) -> Any:
        if not isinstance(section, dict) or not isinstance(before, dict):
            return section
        omit = {p.name: p.key_omit for p in params if p.key_omit is not NEVER}
        return {
            k: v
            for k, v in section.items()
            if k in before or k not in omit or not _is_key_omit(v, omit[k])
        }

    out = dict(new)
    for key, registry in (("dataset", DATASETS), ("feature_map", FEATURE_MAPS)):
        section = new.get(key)
        kind = section.get("kind") if isinstance(section, dict) else None
        if isinstance(kind, str) and kind in registry:
            out[key] = strip(section, old.get(key), registry[kind].params)
    methods, before = new.get("methods"), old.get("methods")
    if isinstance(methods, dict) and isinstance(before, dict):
        out["methods"] = {
            name: strip(s, before.get(name), LEARNERS[name].params) if name in LEARNERS else s
            for name, s in methods.items()
        }
    return out
