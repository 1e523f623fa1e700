"""YAML experiment spec -> validated, resolved config -> cells (DESIGN §7).

Every problem is collected with its key path (``methods.shrinking_gradient.eta[2]: must be > 0,
got -0.1``) and raised together as one :class:`ConfigError` before any cell runs.

Grids: under ``dataset`` and ``budget.dsgd_k`` a list is an *axis* of the experiment (each value
is a separate dataset setting / budget); under ``methods`` a list is a hyperparameter *grid*,
searched and selected on validation loss.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .budget import MATCHES, derive
from .features import FEATURE_MAPS
from .learners import LEARNERS
from .schedules import SCHEDULES


class ConfigError(Exception):
    """A config that cannot be run; ``problems`` is a list of ``(key path, message)``."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("\n".join(f"{p}: {m}" if p else m for p, m in problems))


@dataclass(frozen=True)
class Param:
    """One config key: its type, default, range and documentation."""

    name: str
    type: str  # int | float | bool | str
    default: Any
    doc: str
    min: float | None = None
    min_exclusive: bool = False
    choices: tuple | None = None
    listable: bool = True  # may be given as a list (axis or grid)
    special: tuple = ()  # extra values accepted for a numeric key (e.g. "median", None)

    def describe(self) -> str:
        rng = ""
        if self.min is not None:
            rng = f" {'>' if self.min_exclusive else '>='} {self.min}"
        if self.choices:
            rng = f" one of {', '.join(self.choices)}"
        return f"{self.name} ({self.type}{rng}; default {self.default!r}): {self.doc}"


def _p(name, type_, default, doc, **kw) -> Param:
    return Param(name, type_, default, doc, **kw)


ETA = _p("eta", "float", 0.1, "step size (Dai et al.'s gamma)", min=0, min_exclusive=True)
SCHEDULE = _p("schedule", "str", "constant", "step-size schedule", choices=SCHEDULES)
DECAY = _p(
    "decay",
    "float",
    1.0,
    "lambda of the 'inv' schedule eta/(1+lambda t)",
    min=0,
    min_exclusive=True,
)

METHOD_PARAMS: dict[str, tuple[Param, ...]] = {
    "shrinking_gradient": (
        ETA,
        SCHEDULE,
        DECAY,
        _p("B", "float", 1.0, "norm bound; shrink when |E_t| >= 16 B", min=0, min_exclusive=True),
        _p("sampler", "str", "iid", "draws of i in Algorithm 2", choices=("iid", "systematic")),
        _p(
            "preset",
            "str",
            "budget",
            "'budget': m from the matched budget, eta from the grid; 'theory': Theorem 1's "
            "eta = B/sqrt(T), m = ceil(c B^4 T log(BT)) (no budget matching)",
            choices=("budget", "theory"),
        ),
        _p("c", "float", 1.0, "constant of the theory preset's m", min=0, min_exclusive=True),
    ),
    "doubly_sgd": (
        ETA,
        SCHEDULE,
        DECAY,
        _p("nu", "float", 0.0, "l2 regularization nu (decay 1 - gamma_t nu)", min=0),
    ),
    "fixed_random": (
        ETA,
        SCHEDULE,
        DECAY,
        _p("lam", "float", 0.0, "l2 regularization lambda", min=0),
    ),
    "kernel_ogd": (ETA, SCHEDULE, DECAY),
}

# Splits and scaling shared by the datasets read from tables (file, diabetes).
TABLE_SPLIT_PARAMS = (
    _p("n_val", "int", 100, "validation rows", min=1),
    _p(
        "n_test",
        "int",
        "rest",
        "test rows, or 'rest' (all remaining rows)",
        min=1,
        special=("rest",),
    ),
    _p("standardize", "bool", True, "z-score features with training-split statistics"),
    _p("center", "bool", True, "subtract the training-split mean of the target"),
)

DATASET_PARAMS: dict[str, tuple[Param, ...]] = {
    "clipped_gaussian": (
        _p("D", "int", 600, "input dimension", min=1),
        _p("T", "int", 200, "training examples (one online pass)", min=2),
        _p("n_val", "int", 500, "validation examples", min=1),
        _p("n_test", "int", 2000, "test examples", min=1),
        _p("sparsity", "int", 10, "training points in the target's expansion (<= T)", min=1),
        _p("normalize_rows", "bool", False, "scale every x to unit norm"),
    ),
    "teacher": (
        _p("D", "int", 20, "input dimension", min=1),
        _p("T", "int", 200, "training examples (one online pass)", min=2),
        _p("n_val", "int", 500, "validation examples", min=1),
        _p("n_test", "int", 2000, "test examples", min=1),
        _p(
            "sparsity",
            "int",
            10,
            "training points x_j in the target y = sum_j c_j k(x_j, x), c_j ~ N(0, 1) (<= T)",
            min=1,
        ),
        _p(
            "inputs",
            "str",
            "sphere",
            "x ~ N(0, I_D), max(N(0, I_D), 0), or N(0, I_D) scaled to unit norm",
            choices=("gaussian", "clipped_gaussian", "sphere"),
        ),
        _p(
            "noise",
            "float",
            0.0,
            "label noise std as a fraction of the clean training target's RMS (added to every "
            "split before labels are scaled into [-1, 1])",
            min=0,
        ),
    ),
    "file": (
        _p(
            "path",
            "str",
            None,
            "a .csv (header row of names) or .npz (one 1-D array per column) file, relative "
            "to the working directory (required)",
            special=(None,),
        ),
        _p("target", "str", None, "the label column (required)", special=(None,)),
        _p(
            "features",
            "str",
            "all",
            "'all' (every column but the target) or comma-separated column names",
        ),
        _p("T", "int", 200, "training rows (one online pass)", min=2),
        *TABLE_SPLIT_PARAMS,
    ),
    "diabetes": (
        _p(
            "features",
            "str",
            "all",
            "'all' or comma-separated names among age, sex, bmi, bp, s1..s6",
        ),
        _p("T", "int", 200, "training rows (one online pass; 442 rows in all)", min=2),
        *TABLE_SPLIT_PARAMS,
    ),
}

FEATURE_MAP_PARAMS: dict[str, tuple[Param, ...]] = {
    "coordinate": (),
    "relu": (),
    "fourier": (
        _p(
            "sigma",
            "float",
            "median",
            "RBF bandwidth, or 'median' (median pairwise distance "
            "of the first 1000 training points)",
            min=0,
            min_exclusive=True,
            listable=False,
            special=("median",),
        ),
    ),
}
HAS_KERNEL = {name: cls.has_kernel for name, cls in FEATURE_MAPS.items()}

BUDGET_PARAMS = (
    _p(
        "match",
        "str",
        "evaluations",
        "what is equalized across learners",
        choices=MATCHES,
        listable=False,
    ),
    _p(
        "dsgd_k",
        "int",
        4,
        "Doubly SGD features per round; r and m are derived (a list is an axis)",
        min=1,
    ),
)
EVALUATION_PARAMS = (
    # Defaults: the Algorithm-2 test estimate costs 2 m_test n_test_estimated = 40 000 feature
    # evaluations per Shrinking Gradient cell whatever the size of the test split: one training
    # pass of T = 200 rounds at m = 101 (2 m (T - 1)), a tenth of it at T = 2000 or m = 1000.
    _p(
        "m_test",
        "int",
        100,
        "Algorithm-2 samples per point for estimated predictions (noisy at 100: raise it, e.g. "
        "to the training m, for a test_loss_estimated that compares with the online loss)",
        min=1,
        listable=False,
    ),
    _p(
        "n_test_estimated",
        "int",
        200,
        "test points (the first n of the test split) on which test_loss_estimated is computed, "
        "or 'all'",
        min=1,
        listable=False,
        special=("all",),
    ),
    _p(
        "regret_B",
        "float",
        None,
        "radius B of the RKHS ball for the regret of kernel-expansion learners against the best "
        "f with |f|_H <= B in hindsight (exact kernel, O(T^3) per dataset; null: not computed)",
        min=0,
        min_exclusive=True,
        listable=False,
        special=(None,),
    ),
    _p(
        "curve_points",
        "int",
        200,
        "points of each learning curve kept in curves.csv",
        min=2,
        listable=False,
    ),
)
LIMITS_PARAMS = (
    _p(
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
)
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
)


# ----------------------------------------------------------------------------------------------
# value checks


def _type_ok(p: Param, v: Any) -> bool:
    if p.type == "bool":
        return isinstance(v, bool)
    if p.type == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if p.type == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, str)


def _check_scalar(p: Param, v: Any, path: str, problems: list) -> Any:
    if (v is None or isinstance(v, str)) and v in p.special:
        return v
    if not _type_ok(p, v):
        want = {
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "str": "a string",
        }[p.type]
        if p.special:
            want += " or " + " / ".join("null" if s is None else repr(s) for s in p.special)
        problems.append((path, f"must be {want}, got {v!r}"))
        return None
    if p.type == "float":
        v = float(v)
        if not math.isfinite(v):
            problems.append((path, f"must be finite, got {v!r}"))
            return None
    if p.choices is not None and v not in p.choices:
        close = difflib.get_close_matches(str(v), p.choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append((path, f"must be one of {', '.join(p.choices)}, got {v!r}{hint}"))
        return None
    if p.min is not None:
        bad = v <= p.min if p.min_exclusive else v < p.min
        if bad:
            op = ">" if p.min_exclusive else ">="
            problems.append((path, f"must be {op} {p.min:g}, got {v!r}"))
            return None
    return v


def _check_value(p: Param, v: Any, path: str, problems: list) -> Any:
    if isinstance(v, list):
        if not p.listable:
            problems.append((path, f"must be a single value, not a list, got {v!r}"))
            return None
        if not v:
            problems.append((path, "must not be an empty list"))
            return None
        out = [_check_scalar(p, x, f"{path}[{i}]", problems) for i, x in enumerate(v)]
        if len(set(map(repr, out))) != len(out):
            problems.append((path, f"has repeated values: {v!r}"))
        return out
    if isinstance(v, dict):
        problems.append((path, f"must be a value or a list of values, got a mapping {v!r}"))
        return None
    return _check_scalar(p, v, path, problems)


def _unknown(key: str, valid, path: str, what: str = "key") -> tuple[str, str]:
    close = difflib.get_close_matches(str(key), list(valid), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (path, f"unknown {what} {key!r}{hint} (valid: {', '.join(valid)})")


def _check_section(
    raw: Any, params: tuple[Param, ...], path: str, problems: list, skip: tuple = ()
) -> dict:
    """Validate a mapping of ``params``; fill defaults; report unknown keys."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append((path, f"must be a mapping, got {type(raw).__name__} {raw!r}"))
        return {p.name: p.default for p in params}
    names = [p.name for p in params]
    for key in raw:
        if key not in names and key not in skip:
            problems.append(_unknown(key, names + list(skip), f"{path}.{key}"))
    return {
        p.name: _check_value(p, raw[p.name], f"{path}.{p.name}", problems)
        if p.name in raw
        else copy.deepcopy(p.default)
        for p in params
    }


def _kind_section(
    raw: Any, registry: dict, path: str, problems: list, default_kind: str | None
) -> dict | None:
    if raw is None and default_kind is not None:
        raw = {"kind": default_kind}
    if raw is None:
        problems.append((path, "is required"))
        return None
    if not isinstance(raw, dict):
        problems.append((path, f"must be a mapping, got {type(raw).__name__} {raw!r}"))
        return None
    kind = raw.get("kind", default_kind)
    if kind is None:
        problems.append((f"{path}.kind", f"is required (one of {', '.join(registry)})"))
        return None
    if not isinstance(kind, str) or kind not in registry:
        problems.append(_unknown(kind, registry, f"{path}.kind", what=path.split(".")[-1]))
        return None
    out = {"kind": kind}
    out.update(_check_section(raw, registry[kind], path, problems, skip=("kind",)))
    return out


# ----------------------------------------------------------------------------------------------
# loading


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file; every failure becomes a ConfigError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError([("", f"config file {str(p)!r} does not exist")])
    try:
        text = p.read_text()
        doc = yaml.safe_load(text)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError([("", f"{p}: not valid YAML: {exc}")]) from None
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


def resolve(raw: dict, default_name: str = "experiment") -> dict:
    """Validate a raw config mapping and return it with every default filled in."""
    problems: list[tuple[str, str]] = []
    for key in raw:
        if key not in TOP_LEVEL:
            problems.append(_unknown(key, TOP_LEVEL, str(key)))
    cfg: dict[str, Any] = {}
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        problems.append(
            ("name", f"must be a non-empty string usable as a folder name, got {name!r}")
        )
    cfg["name"] = name
    description = raw.get("description", "")
    if not isinstance(description, str):
        problems.append(("description", f"must be a string, got {description!r}"))
    cfg["description"] = description
    for key, lo, default in (("seed", 0, 0), ("repetitions", 1, 10)):
        v = raw.get(key, default)
        cfg[key] = _check_scalar(_p(key, "int", default, "", min=lo), v, key, problems)
    cfg["dataset"] = _kind_section(raw.get("dataset"), DATASET_PARAMS, "dataset", problems, None)
    cfg["feature_map"] = _kind_section(
        raw.get("feature_map"), FEATURE_MAP_PARAMS, "feature_map", problems, "coordinate"
    )
    cfg["budget"] = _check_section(raw.get("budget"), BUDGET_PARAMS, "budget", problems)
    cfg["evaluation"] = _check_section(
        raw.get("evaluation"), EVALUATION_PARAMS, "evaluation", problems
    )
    cfg["limits"] = _check_section(raw.get("limits"), LIMITS_PARAMS, "limits", problems)
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
                f"must be a non-empty mapping of learners ({', '.join(LEARNERS)}), got {methods!r}",
            )
        )
    else:
        for mname, mraw in methods.items():
            if mname not in LEARNERS:
                problems.append(_unknown(mname, LEARNERS, f"methods.{mname}", what="learner"))
                continue
            cfg["methods"][mname] = _check_section(
                mraw, METHOD_PARAMS[mname], f"methods.{mname}", problems
            )
    if not problems:
        _cross_checks(cfg, problems)
    if problems:
        raise ConfigError(problems)
    return cfg


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def _dataset_checks(cfg: dict, problems: list) -> None:
    """What the dataset section needs beyond its keys' ranges: ``sparsity <= T``; a feature map
    with a closed-form kernel for datasets labelled by that kernel; the file (or package) of
    every dataset setting, checked by :func:`ilnrun.data.check` (a key given as a list is
    named with the index of the offending value)."""
    from .data import NEEDS_FEATURE_MAP, check

    ds = cfg["dataset"]
    if "sparsity" in ds:
        for T, sp in itertools.product(_as_list(ds["T"]), _as_list(ds["sparsity"])):
            if sp > T:
                problems.append(("dataset.sparsity", f"must be <= T, got sparsity={sp} with T={T}"))
                break
    fm = cfg["feature_map"]["kind"]
    if ds["kind"] in NEEDS_FEATURE_MAP and not HAS_KERNEL[fm]:
        problems.append(
            (
                "dataset.kind",
                f"{ds['kind']!r} labels data with the feature map's kernel; feature map {fm!r} "
                "has no closed-form kernel",
            )
        )
    seen = set()
    for setting in dataset_settings(cfg):
        for key, msg in check(setting):
            path = f"dataset.{key}"
            if isinstance(ds.get(key), list):
                path += f"[{ds[key].index(setting[key])}]"
            if (path, msg) not in seen:
                seen.add((path, msg))
                problems.append((path, msg))


def _cross_checks(cfg: dict, problems: list) -> None:
    ds = cfg["dataset"]
    _dataset_checks(cfg, problems)
    if "kernel_ogd" in cfg["methods"] and not HAS_KERNEL[cfg["feature_map"]["kind"]]:
        problems.append(
            (
                "methods.kernel_ogd",
                f"needs a closed-form kernel; feature map {cfg['feature_map']['kind']!r} has none",
            )
        )
    for T in _as_list(ds["T"]):
        for k in _as_list(cfg["budget"]["dsgd_k"]):
            b = derive(cfg["budget"]["match"], k, T)
            for size, learner in (
                ("m", "shrinking_gradient"),
                ("r", "fixed_random"),
                ("k", "doubly_sgd"),
            ):
                if learner in cfg["methods"] and getattr(b, size) < 1:
                    problems.append(
                        ("budget.dsgd_k", f"gives {size} = {getattr(b, size)} < 1 for T={T}")
                    )


def load(path: str | Path) -> dict:
    """Load and resolve a config file (the experiment name defaults to the file's stem)."""
    return resolve(load_yaml(path), default_name=Path(path).stem)


def dump(cfg: dict) -> str:
    return yaml.safe_dump(
        cfg, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100
    )


# ----------------------------------------------------------------------------------------------
# cells


def digest(obj: Any) -> str:
    """Stable hex digest of a JSON-able object (sorted keys)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Cell:
    """One (dataset setting, repetition, method, hyperparameter setting[, budget])."""

    index: int
    data: dict  # resolved dataset setting, all scalars (kind + params)
    rep: int
    method: str
    hyper: dict  # hyperparameters of this grid point (scalars; decay None unless schedule inv)
    dsgd_k: int | None  # the budget axis value; None for kernel_ogd

    @property
    def data_key(self) -> dict:
        return {"data": self.data, "rep": self.rep}

    @property
    def key(self) -> dict:
        """What identifies the cell (and seeds it). Hyperparameters at their default value or
        unused (``None``) are left out, so adding an optional hyperparameter to ilnrun does not
        change the seeds of existing experiments."""
        defaults = {p.name: p.default for p in METHOD_PARAMS[self.method]}
        hyper = {k: v for k, v in self.hyper.items() if v is not None and v != defaults.get(k)}
        return {**self.data_key, "method": self.method, "hyper": hyper, "dsgd_k": self.dsgd_k}

    @property
    def id(self) -> str:
        return digest(self.key)[:20]


def axes(cfg: dict) -> list[str]:
    """Names of the dataset keys that vary (lists) — the experiment's dataset axes."""
    return [k for k, v in cfg["dataset"].items() if isinstance(v, list)]


def dataset_settings(cfg: dict) -> list[dict]:
    ds = cfg["dataset"]
    keys = list(ds)
    values = [_as_list(ds[k]) for k in keys]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


def unused_keys(h: dict) -> set[str]:
    """Hyperparameters a setting does not use: ``decay`` outside the ``inv`` schedule; under the
    Shrinking Gradient ``theory`` preset its ``eta``/``schedule``/``decay`` (set by Theorem 1),
    and ``c`` outside it."""
    out = set() if h.get("schedule") == "inv" else {"decay"}
    if h.get("preset") == "theory":
        out |= {"eta", "schedule", "decay"}
    elif "preset" in h:
        out.add("c")
    return out


def uses_budget(method: str, h: dict) -> bool:
    """Whether a setting takes its size (m, k or r) from the matched budget."""
    return LEARNERS[method].budget_param is not None and h.get("preset") != "theory"


def method_grid(params: dict) -> list[dict]:
    """Expand a method's hyperparameter lists into settings; keys a setting does not use
    (:func:`unused_keys`) are ``None`` and the duplicates this creates are dropped."""
    keys = list(params)
    seen, out = set(), []
    for combo in itertools.product(*[_as_list(params[k]) for k in keys]):
        h = dict(zip(keys, combo, strict=True))
        for key in unused_keys(h):
            h[key] = None
        sig = json.dumps(h, sort_keys=True)
        if sig not in seen:
            seen.add(sig)
            out.append(h)
    return out


def cells(cfg: dict) -> list[Cell]:
    """All cells, ordered so that cells sharing a dataset instance are consecutive."""
    out: list[Cell] = []
    budgets = _as_list(cfg["budget"]["dsgd_k"])
    for data in dataset_settings(cfg):
        for rep in range(cfg["repetitions"]):
            for method, params in cfg["methods"].items():
                grid = method_grid(params)
                for k in budgets:
                    out += [
                        Cell(len(out) + i, data, rep, method, h, k)
                        for i, h in enumerate(h for h in grid if uses_budget(method, h))
                    ]
                out += [
                    Cell(len(out) + i, data, rep, method, h, None)
                    for i, h in enumerate(h for h in grid if not uses_budget(method, h))
                ]
    return out
