"""The config's keys and their validation: YAML -> resolved config (docs/architecture.md §2).

Every problem is collected with its key path (``methods.shrinking_gradient.eta[2]: must be > 0,
got -0.1``) and raised together as one :class:`~ilnrun.params.ConfigError` before any cell runs.
The keys of learners, feature maps and datasets come from their specs (:data:`LEARNERS`,
:data:`FEATURE_MAPS`, :data:`DATASETS`); this module holds only the experiment-level sections.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .. import cost
from ..budget import MATCHES, derive, setting_size
from ..datasets import DATASETS, DataError, build_dataset, file_identity, inspect
from ..features import DEFAULT_FEATURE_MAP, FEATURE_MAPS, FeatureMap
from ..learners import LEARNERS
from ..learners.implements import NOTHING, refusal
from ..params import (
    ConfigError,
    Param,
    check_kind,
    check_scalar,
    check_section,
    key_text,
    show,
    unknown,
)
from ..safe_yaml import YamlLimitError, load_bounded
from . import grid
from .keys import (
    EVALUATION_PARAMS,
    NEW_EVALUATION_KEYS,
    add_evaluation_keys,
    add_losses,
    add_select_on,
    check_method,
    check_protocol,
    plain_evaluation,
)
from .typed import Experiment

BUDGET_PARAMS = (
    Param(
        "match",
        "str",
        "evaluations",
        "what is equalized across learners",
        choices=MATCHES,
        listable=False,
    ),
    Param(
        "dsgd_k",
        "int",
        4,
        "Doubly SGD features per round; every budgeted learner's size is derived (a list is an "
        "axis)",
        min=1,
    ),
)


LIMITS_PARAMS = (
    Param(
        "cell_timeout_s",
        "float",
        None,
        "wall-clock seconds a cell's training pass may take; it then stops at the next round "
        "and is recorded timed_out (null: no limit)",
        min=0,
        min_exclusive=True,
        listable=False,
        special=(None,),
    ),
    Param(
        "max_cells",
        "int",
        200_000,
        "a config with more cells is refused before it starts (raise it deliberately)",
        min=1,
        listable=False,
    ),
    Param(
        "max_memory_gb",
        "float",
        None,
        "a config whose largest cell (times --jobs workers) is estimated to need more memory "
        "(GiB) is refused before anything is built (null: 80% of this machine's memory)",
        min=0,
        min_exclusive=True,
        listable=False,
        special=(None,),
    ),
)
ENGINES = ("numpy", "jax")  # ilnrun.engines executes each
DEFAULT_ENGINE = "numpy"
ENGINE = Param(
    "engine",
    "str",
    DEFAULT_ENGINE,
    "implementation of the learners: 'numpy' (reference) or 'jax' (lockstep batches on CPU or "
    "GPU; pip install 'ilnrun[jax]'); equal in distribution, not bit for bit",
    choices=ENGINES,
    listable=False,
)


def engine_of(cfg: Mapping) -> str:
    """The engine of a resolved config (``numpy`` when it names none)."""
    return cfg.get("engine", DEFAULT_ENGINE)


TOP_LEVEL = (
    "name",
    "description",
    "seed",
    "repetitions",
    "dataset",
    "feature_map",
    "budget",
    "evaluation",
    "methods",
    "limits",
    "engine",
    "loss",
)
# written into the resolved config (never read from a user's file: recomputed on every load)
DERIVED = ("inputs", "data_used")
NAME_MAX = 100
DESCRIPTION_MAX = 10_000


# ----------------------------------------------------------------------------------------------
# loading


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file within the bounds of :mod:`ilnrun.safe_yaml` (size, nesting, aliases);
    every failure becomes a ConfigError naming the file, never echoing its content."""
    p = Path(path)
    try:
        found = p.is_file()
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        why = exc.strerror if isinstance(exc, OSError) else "it holds a NUL byte"
        shown = show(str(p), 300)
        raise ConfigError([("", f"config file {shown} cannot be read: {why}")]) from None
    if not found:
        what = "is not a file" if os.path.exists(p) else "does not exist"
        raise ConfigError([("", f"config file {show(str(p), 300)} {what}")])
    try:
        doc = load_bounded(p)
    except YamlLimitError as exc:
        raise ConfigError([("", f"{p}: refused: {exc}")]) from None
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        what = exc.problem or exc.context or "syntax error"
        raise ConfigError([("", f"{p}: not valid YAML: {what}{where}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([("", f"{p}: not valid YAML: {type(exc).__name__}")]) from None
    except UnicodeDecodeError:
        raise ConfigError([("", f"{p}: not valid YAML: not UTF-8 text")]) from None
    except OSError as exc:
        raise ConfigError([("", f"{p}: cannot be read: {exc.strerror or exc}")]) from None
    if doc is None:
        raise ConfigError([("", f"{p}: the file is empty")])
    if not isinstance(doc, dict):
        raise ConfigError(
            [
                (
                    "",
                    f"{p}: the document must be a mapping of keys "
                    f"(name, dataset, methods, ...), got {type(doc).__name__}",
                )
            ]
        )
    return doc


def load(path: str | Path) -> Experiment:
    """Load and resolve a config file (the experiment name defaults to the file's stem; relative
    data paths are relative to the file's folder)."""
    p = Path(path)
    return resolve(load_yaml(p), default_name=p.stem, base_dir=p.resolve().parent)


def dump(cfg: Mapping) -> str:
    """The resolved config as YAML (``config.yaml``)."""
    return yaml.safe_dump(
        cfg.as_dict() if isinstance(cfg, Experiment) else cfg,
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=True,
        width=100,
    )


# ----------------------------------------------------------------------------------------------
# resolving


def _check_name(name: Any, problems: list) -> None:
    """A folder name: non-empty, at most NAME_MAX characters, no path separator, no leading
    dot, no control character."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > NAME_MAX
        or "/" in name
        or "\\" in name
        or name.startswith(".")
        or any(unicodedata.category(ch).startswith("C") for ch in name)
    ):
        problems.append(
            (
                "name",
                f"must be a non-empty string usable as a folder name (at most {NAME_MAX} "
                f"characters, no '/', no leading '.', no control characters), got {show(name)}",
            )
        )


def resolve(
    raw: dict, default_name: str = "experiment", base_dir: Path | None = None
) -> Experiment:
    """Validate a raw config mapping; return the experiment with every default filled in, as
    frozen parts (:class:`~ilnrun.config.typed.Experiment`; its ``as_dict()`` is the resolved
    mapping)."""
    problems: list[tuple[str, str]] = []
    for key in raw:
        if key not in TOP_LEVEL and key not in DERIVED:
            problems.append(unknown(key, TOP_LEVEL, key_text(key)))
    cfg: dict[str, Any] = {}
    name = raw.get("name", default_name)
    _check_name(name, problems)
    cfg["name"] = name
    description = raw.get("description", "")
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        problems.append(
            ("description", f"must be a string of at most {DESCRIPTION_MAX:,} characters")
        )
    cfg["description"] = description
    for key, lo, default in (("seed", 0, 0), ("repetitions", 1, 10)):
        v = raw.get(key, default)
        cfg[key] = check_scalar(Param(key, "int", default, "", min=lo), v, key, problems)
    cfg["dataset"] = check_kind(raw.get("dataset"), DATASETS, "dataset", problems, None)
    cfg["feature_map"] = check_kind(
        raw.get("feature_map"), FEATURE_MAPS, "feature_map", problems, DEFAULT_FEATURE_MAP
    )
    cfg["budget"] = check_section(raw.get("budget"), BUDGET_PARAMS, "budget", problems)
    raw_eval = raw.get("evaluation")
    cfg["evaluation"] = check_section(
        plain_evaluation(raw_eval),
        EVALUATION_PARAMS,
        "evaluation",
        problems,
        skip=NEW_EVALUATION_KEYS,
    )
    cfg["limits"] = check_section(raw.get("limits"), LIMITS_PARAMS, "limits", problems)
    cfg["engine"] = check_scalar(ENGINE, raw.get("engine", DEFAULT_ENGINE), "engine", problems)
    methods = raw.get("methods")
    cfg["methods"] = {}
    if methods is None:
        problems.append(
            ("methods", f"is required: a mapping with one or more of {', '.join(LEARNERS)}")
        )
    elif not isinstance(methods, dict) or not methods:
        problems.append(
            (
                "methods",
                f"must be a non-empty mapping of learners ({', '.join(LEARNERS)}), "
                f"got {show(methods)}",
            )
        )
    else:
        for mname, mraw in methods.items():
            if mname not in LEARNERS:
                problems.append(
                    unknown(mname, LEARNERS, f"methods.{key_text(mname)}", what="learner")
                )
                continue
            cfg["methods"][mname] = section = check_method(mname, mraw, problems)
            if LEARNERS[mname].check is not None:
                found = LEARNERS[mname].check(section)
                problems += [(f"methods.{mname}.{key}", msg) for key, msg in found]
    add_losses(raw, cfg, problems)
    add_select_on(raw_eval, cfg, problems)
    add_evaluation_keys(raw_eval, cfg, problems)
    if not problems:
        _resolve_paths(cfg, base_dir, problems)
    if not problems:
        _cross_checks(cfg, problems)
    if problems:
        raise ConfigError(problems)
    return Experiment.from_dict(cfg)


def data_lines(cfg: dict) -> list[str]:
    """One line per dataset setting of what it uses (``data_used``), for messages and reports."""
    out = []
    for d in cfg.get("data_used", []):
        s = d["splits"]
        axes = ", ".join(f"{k}={v}" for k, v in d.items() if k not in DESCRIBED)
        out.append(
            (f"[{axes}] " if axes else "")
            + f"{d['rows']:,} rows; target {d['target']}; features {', '.join(d['features'])}; "
            f"train / val / test rows {s['train']} / {s['val']} / {s['test']}"
        )
    return out


DESCRIBED = ("rows", "target", "features", "splits")


_as_list = grid.as_list


def _resolve_paths(cfg: dict, base_dir: Path | None, problems: list) -> None:
    """Make every path of the dataset section absolute (relative to the config file's folder,
    or the working directory for a config given as a mapping) and record each file's SHA-256,
    size, rows and columns under ``inputs``: a changed file is a changed config."""
    ds = cfg["dataset"]
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    inputs = {}
    for p in DATASETS[ds["kind"]].params:
        if p.type != "path" or ds.get(p.name) is None:
            continue
        values = _as_list(ds[p.name])
        resolved = []
        for i, v in enumerate(values):
            where = f"dataset.{p.name}" + (f"[{i}]" if isinstance(ds[p.name], list) else "")
            f = Path(v).expanduser()
            f = f if f.is_absolute() else base / f
            try:
                f = f.resolve()
                if f.is_file():  # (a missing file is reported by the dataset's own check)
                    inputs[str(f)] = file_identity(f, p.name)  # suffix and size checked first
            except OSError as exc:
                problems.append((where, f"cannot read {show(str(f), 300)}: {exc.strerror}"))
                continue
            except DataError as exc:
                problems.append((where, exc.message))
                continue
            resolved.append(str(f))
        if len(resolved) == len(values):
            ds[p.name] = resolved if isinstance(ds[p.name], list) else resolved[0]
    if inputs:
        cfg["inputs"] = inputs


def _cross_checks(cfg: dict, problems: list) -> None:
    """What the sections need from each other: the dataset's own checks, closed-form kernels
    (learners that need one and ``evaluation.regret_B``), budget sizes of at least 1, the data
    the feature map can work with, and resources."""
    _dataset_checks(cfg, problems)
    check_protocol(cfg, problems)
    fm = cfg["feature_map"]["kind"]
    has_kernel = FEATURE_MAPS[fm].has_kernel
    for name in cfg["methods"]:
        if LEARNERS[name].needs_kernel and not has_kernel:
            problems.append(
                (f"methods.{name}", f"needs a closed-form kernel; feature map {fm!r} has none")
            )
    for name, params in cfg["methods"].items():
        _setting_checks(name, params, engine_of(cfg), problems)
    if cfg["evaluation"].get("regret_B") is not None and not has_kernel:
        problems.append(
            (
                "evaluation.regret_B",
                f"the regret's comparator needs a closed-form kernel; feature map {fm!r} has "
                "none: set it to null",
            )
        )
    for T, n_eval in _budget_sizes(cfg, problems):
        for k in _as_list(cfg["budget"]["dsgd_k"]):
            b = derive(cfg["budget"]["match"], k, T, n_eval)
            for name, params in cfg["methods"].items():
                size = LEARNERS[name].budget
                if size is None:
                    continue
                if b.size(size.name) < 1:
                    problems.append(
                        (
                            "budget.dsgd_k",
                            f"gives {size.name} = {b.size(size.name)} < 1 for T={T} ({name})",
                        )
                    )
                    continue
                # a setting whose unit costs more (a batch, Taylor copies) takes a smaller size
                small = _setting_sizes_below_one(b, name, params)
                if small:
                    problems.append(("budget.dsgd_k", f"gives {small} for T={T}"))
    _engine_checks(cfg, problems)
    if not problems:  # sizes first: the feature map's check builds a dataset
        _resource_checks(cfg, problems)
    if not problems:
        _feature_map_checks(cfg, problems)


def _setting_sizes_below_one(b, name: str, params: dict) -> str:
    """The first setting of learner ``name``'s grid (``params``) that takes a size below 1 from
    budget ``b`` (:func:`ilnrun.budget.setting_size`: a setting whose unit of size costs more
    than the budget's, a batch or Taylor copies), as ``"<size> = <value> (...)"`` text; ``""``
    where none does."""
    spec = LEARNERS[name]
    for h in grid.method_grid(name, params):
        if spec.takes_budget(h):
            own = setting_size(b, name, h)
            if own < 1:
                shown = ", ".join(f"{p}={v}" for p, v in h.items() if v is not None)
                return f"{spec.budget.name} = {own} < 1 ({name}: {shown})"
    return ""


def _setting_checks(name: str, params: dict, engine: str, problems: list) -> None:
    """The learner's own refusals (``LearnerSpec.check_settings``) of its grid's settings, those
    it leaves out included."""
    check = LEARNERS[name].check_settings
    if check is not None:
        hypers = grid.method_grid(name, params, skip=False)
        problems.extend((f"methods.{name}.{key}", msg) for key, msg in check(hypers, engine))


def _budget_sizes(cfg: dict, problems: list) -> list[tuple[int, int]]:
    """``(T, n_eval)`` for every budget the config matches: each ``dataset.T`` with
    ``n_eval = 0``, or under ``budget.match: total`` each dataset setting's ``T`` and its
    validation + test points (none after another problem: the sizes may not be known)."""
    if cfg["budget"]["match"] != "total":
        return [(T, 0) for T in _as_list(cfg["dataset"]["T"])]
    if problems:
        return []
    used = cfg.get("data_used", [])
    sizes = [cost.setting_sizes(s, used) for s in grid.dataset_settings(cfg)]
    return list(dict.fromkeys((T, n_val + n_test) for T, n_val, n_test, _ in sizes))


def has_jax_twin(fmap_cls: type[FeatureMap]) -> bool:
    """Whether a feature map provides its jax twin (``jax_sample``, ``jax_point`` and
    ``jax_pairs`` of its own, not the base class's)."""
    return all(
        getattr(fmap_cls, name).__func__ is not getattr(FeatureMap, name).__func__
        for name in ("jax_sample", "jax_point", "jax_pairs")
    )


def _engine_checks(cfg: dict, problems: list) -> None:
    """``engine: jax`` (or ``--engine jax``) needs the feature map's jax twin when a configured
    learner has a jax pass (the passes draw and evaluate features with it): a map without one is
    refused, named. A learner without a jax pass is not refused: it runs its numpy ``fit``
    (docs/architecture.md §8). A setting whose ``fit`` keywords the learner's jax pass does not
    declare (``LearnerSpec.implements["jax"]``: e.g. ``average: true``, Fixed-Random's ridge, a
    parameter no pass has declared yet) is refused, the learner, key and values named."""
    if engine_of(cfg) != "jax":
        return
    fm = cfg["feature_map"]["kind"]
    with_pass = [n for n in cfg["methods"] if "jax" in LEARNERS[n].engines]
    Ts = _as_list(cfg["dataset"]["T"])
    for n in with_pass:
        spec = LEARNERS[n]
        settings = grid.method_grid(n, cfg["methods"][n], skip=False)
        for key, values in spec.not_implemented("jax", settings, Ts).items():
            declared = spec.implements.get("jax", NOTHING)
            problems.append(
                (
                    f"methods.{n}.{key}",
                    f"{refusal(n, 'jax', declared, key, values)}; use engine: numpy "
                    "(--engine numpy)",
                )
            )
    if with_pass and not has_jax_twin(FEATURE_MAPS[fm]):
        problems.append(
            (
                "feature_map.kind",
                f"feature map {fm!r} has no jax twin, which the jax engine needs for "
                f"{', '.join(with_pass)}; use engine: numpy (--engine numpy) or a map with one "
                f"({', '.join(k for k, c in FEATURE_MAPS.items() if has_jax_twin(c))})",
            )
        )


def _dataset_checks(cfg: dict, problems: list) -> None:
    """A feature map with a closed-form kernel for datasets labelled by that kernel (unless they
    estimate it: ``DatasetSpec.estimated_kernel``); the dataset's own checks of every setting
    (``DatasetSpec.check``: every precondition of its builder, e.g. ``sparsity <= T``; a key
    given as a list is named with the index of the offending value), which also say what each
    setting uses: recorded under ``data_used`` (for tables: the feature columns, the rows, the
    split sizes)."""
    ds = cfg["dataset"]
    fm = cfg["feature_map"]["kind"]
    spec = DATASETS[ds["kind"]]
    if spec.needs_kernel and not spec.estimated_kernel and not FEATURE_MAPS[fm].has_kernel:
        problems.append(
            (
                "dataset.kind",
                f"{ds['kind']!r} labels data with the feature map's kernel; feature map {fm!r} "
                "has no closed-form kernel",
            )
        )
    seen, used, named = set(), [], {}
    for setting in grid.dataset_settings(cfg):
        found, what = inspect(setting)
        for key, msg in found:
            path = f"dataset.{key}"
            if grid._is_axis(ds["kind"], key, ds.get(key)):
                path += f"[{ds[key].index(setting[key])}]"
            if (path, msg) not in seen:
                seen.add((path, msg))
                problems.append((path, msg))
        if what is not None:
            named.update(what.pop("inputs", {}))  # a table read by name: its content's hash
            axes = {k: v for k, v in setting.items() if grid._is_axis(ds["kind"], k, ds[k])}
            used.append({**axes, **what})
    if used and not problems:
        cfg["data_used"] = used
    if named and not problems:
        cfg["inputs"] = {**cfg.get("inputs", {}), **named}


def _feature_map_checks(cfg: dict, problems: list) -> None:
    """Data that make the feature map degenerate (e.g. a zero Fourier bandwidth), checked on the
    first repetition's training inputs of every dataset setting — only for maps that check."""
    fmap = FEATURE_MAPS[cfg["feature_map"]["kind"]]
    if fmap.check_data.__func__ is FeatureMap.check_data.__func__:
        return
    for setting in grid.dataset_settings(cfg):
        key = {"data": grid.data_identity(cfg, setting) or setting, "rep": 0}
        rng = np.random.default_rng(grid.seed_sequence(cfg["seed"], key))
        try:
            data = build_dataset(setting, rng, cfg["feature_map"])
        except DataError as exc:
            problems.append((f"dataset.{exc.key}", exc.message))
            return
        msg = fmap.check_data(cfg["feature_map"], data.X_train)
        if msg:
            problems.append(("feature_map", msg))
            return


def _resource_checks(cfg: dict, problems: list) -> None:
    """Refuse what cannot run here, before anything is built: more cells than
    ``limits.max_cells``, or one worker running the largest cell estimated above
    ``limits.max_memory_gb`` (:mod:`ilnrun.cost`; ``--jobs`` workers are checked
    when the run starts)."""
    lim = cfg["limits"]
    n = _count_cells(cfg)
    if n > lim["max_cells"]:
        problems.append(
            (
                "limits.max_cells",
                f"the config has {n:,} cells, more than limits.max_cells = "
                f"{lim['max_cells']:,}; shrink the grids or axes, or raise limits.max_cells",
            )
        )
        return
    cost.check(cost.Workload.of(Experiment.from_dict(cfg)), problems)


def _count_cells(cfg: dict) -> int:
    """The number of cells, counted without listing them."""
    n_data = len(grid.dataset_settings(cfg)) * cfg["repetitions"]
    budgets = len(_as_list(cfg["budget"]["dsgd_k"]))
    per = 0
    for name, params in cfg["methods"].items():
        spec = LEARNERS[name]
        for h in grid.method_grid(name, params):
            per += budgets if spec.takes_budget(h) else 1
    return n_data * per
