"""The ``evaluation`` section's keys, and keys that must not change a config resolved without
them (docs/protocol.md §5.2-§5.7, §12): ``evaluation.select_on``, ``methods.<learner>.eta_scale``
and the loss (``loss``, ``methods.<learner>.loss``). Each is stored in the resolved config only
when it differs from its default, so cell ids, record digests and resumes of configs that do not
use them are those of before the keys existed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..datasets import DATASETS
from ..learners import LEARNERS
from ..learners.base import ETA_SCALE
from ..learners.estimate_draws import DRAWS, MULTINOMIAL
from ..losses import DEFAULT_LOSS, LOSSES
from ..params import Param, check_scalar, check_section, check_value, key_text, show, unknown

EVALUATION_PARAMS = (
    # Defaults: the Algorithm-2 test estimate costs 2 m_test n_test_estimated = 40 000 feature
    # evaluations per cell whatever the size of the test split: one training pass of T = 200
    # rounds at m = 101 (2 m (T - 1)), a tenth of it at T = 2000 or m = 1000.
    Param(
        "m_test",
        "int",
        100,
        "Algorithm-2 samples per point for estimated predictions (noisy at 100: raise it, e.g. "
        "to the training m, for a test_loss_estimated that compares with the online loss); or a "
        "rule per cell: theorem1 (Theorem 1.3's ceil(c B^4 T log(BT))), train (the training m) "
        "or {per_T: c} (ceil(c T))",
        min=1,
        listable=False,
    ),
    Param(
        "n_test_estimated",
        "int",
        200,
        "test points (the first n of the test split) on which test_loss_estimated is computed, "
        "or 'all'",
        min=1,
        listable=False,
        special=("all",),
    ),
    Param(
        "regret_B",
        "float",
        None,
        "radius B of the RKHS ball for the regret of kernel-expansion learners against the best "
        "f with |f|_H <= B in hindsight (exact: O(T^3) per dataset with the T x T kernel, up to "
        "T = 20 000; O(T D^2) in the coordinate map's primal; null: not computed)",
        min=0,
        min_exclusive=True,
        listable=False,
        special=(None,),
    ),
    Param(
        "curve_points",
        "int",
        200,
        "points of each learning curve kept in curves.csv",
        min=2,
        listable=False,
    ),
)


# ``evaluation.select_on`` (docs/protocol.md §5.2): what a learner's settings are selected on.
# It changes no number a cell computes (only which setting the tables call selected), so it is
# absent from the resolved config at its default and never part of a record's digest.
SELECT_ON = Param(
    "select_on",
    "str",
    "exact",
    "what settings are selected on: exact (the validation loss evaluated exactly, with the "
    "kernel where the predictor is a kernel expansion) or estimated (for learners with an "
    "Algorithm-2 validation loss, val_loss_estimated: what a user without the kernel can "
    "compute); one value for every learner, or a mapping learner -> exact | estimated",
    choices=("exact", "estimated"),
    listable=False,
)


def check_select_on(raw: Any, methods: Mapping, problems: list) -> str | dict | None:
    """``evaluation.select_on``: ``exact``, ``estimated`` (for every learner where it applies)
    or a mapping learner -> mode; ``estimated`` named for a learner of the config without an
    Algorithm-2 validation loss is a problem. Returns the value to store, ``None`` at the
    default (the key is then left out of the resolved config)."""
    path = "evaluation.select_on"
    if isinstance(raw, dict):
        out = {}
        for name, mode in raw.items():
            where = f"{path}.{key_text(name)}"
            if name not in methods:
                problems.append(unknown(name, list(methods), where, what="learner of methods"))
                continue
            mode = check_scalar(SELECT_ON, mode, where, problems)
            if mode == "estimated" and not LEARNERS[name].estimated_validation:
                with_it = [n for n, s in LEARNERS.items() if s.estimated_validation]
                problems.append(
                    (
                        where,
                        f"{name} has no Algorithm-2 validation loss; 'estimated' applies to "
                        f"{', '.join(with_it)}",
                    )
                )
            elif mode is not None and mode != SELECT_ON.default:
                out[name] = mode
        return out or None
    mode = check_scalar(SELECT_ON, raw, path, problems)
    return None if mode in (None, SELECT_ON.default) else mode


# ``methods.<learner>.edges_ok`` (docs/protocol.md §5.1): why a selection at the edge of a
# parameter's grid is acceptable, a mapping parameter -> reason. It changes no number: never part
# of a setting or a cell key (:func:`ilnrun.config.grid.method_grid` leaves it out), stored in the
# resolved config only when given, and left out of what a resume compares.
EDGES_OK = "edges_ok"


def check_edges_ok(name: str, raw: Any, problems: list) -> dict[str, str] | None:
    """``methods.<name>.edges_ok``: a mapping from parameters of learner ``name`` to non-empty
    reason strings; ``None`` (nothing stored) when empty or invalid, with a problem naming the
    key for every bad entry."""
    path = f"methods.{name}.{EDGES_OK}"
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(
            (path, f"must be a mapping parameter -> reason (a string), got {show(raw)}")
        )
        return None
    params = [p.name for p in LEARNERS[name].params]
    out = {}
    for param, reason in raw.items():
        where = f"{path}.{key_text(param)}"
        if param not in params:
            problems.append(unknown(param, params, where, what=f"parameter of {name}"))
        elif not isinstance(reason, str) or not reason.strip():
            problems.append((where, f"must be a non-empty reason (a string), got {show(reason)}"))
        else:
            out[param] = reason.strip()
    return out or None


def check_method(name: str, raw: Any, problems: list) -> dict:
    """A learner's section; a learner with ``eta`` also takes ``eta_scale``
    (docs/protocol.md §5.3), kept in the resolved config only when it is not ``none``; every
    learner takes ``edges_ok`` (:func:`check_edges_ok`), kept only when given, and ``loss``
    (resolved afterwards with the experiment's, :func:`add_losses`)."""
    spec = LEARNERS[name]
    path = f"methods.{name}"
    has_eta = ETA_SCALE in spec.config_params
    skip = (("eta_scale",) if has_eta else ()) + (EDGES_OK, "loss")
    out = check_section(raw, spec.params, path, problems, skip=skip)
    if has_eta and isinstance(raw, dict) and "eta_scale" in raw:
        scale = check_scalar(ETA_SCALE, raw["eta_scale"], f"{path}.eta_scale", problems)
        if scale is not None and scale != ETA_SCALE.default:
            out["eta_scale"] = scale
    if isinstance(raw, dict) and EDGES_OK in raw:
        edges_ok = check_edges_ok(name, raw[EDGES_OK], problems)
        if edges_ok is not None:
            out[EDGES_OK] = edges_ok
    return out


def grid_params(params: Mapping) -> dict:
    """A learner's resolved section without ``edges_ok``: the parameters its settings are
    expanded from."""
    return {k: v for k, v in params.items() if k != EDGES_OK}


def add_select_on(raw_eval: Any, cfg: dict, problems: list) -> None:
    """Store a valid, non-default ``evaluation.select_on`` of the raw ``evaluation`` section in
    ``cfg["evaluation"]`` (:func:`check_select_on`; the learners are ``cfg["methods"]``)."""
    if isinstance(raw_eval, dict) and "select_on" in raw_eval:
        select_on = check_select_on(raw_eval["select_on"], cfg["methods"], problems)
        if select_on is not None:
            cfg["evaluation"]["select_on"] = select_on


# ``evaluation.kernel``, ``evaluation.m_test``'s rules and ``evaluation.m_test_sweep``
# (docs/protocol.md §5.4-§5.6): stored in the resolved config only where they differ from what
# ran before they existed (``kernel: exact``, no sweep, an integer ``m_test``), so cell ids and
# record digests of configs that do not use them are unchanged.
KERNEL = Param(
    "kernel",
    "str",
    "exact",
    "the evaluation protocol: exact (kernel expansions are validated and tested with the "
    "closed-form kernel where the map has one) or free (no closed-form kernel value anywhere: "
    "kernel expansions by Algorithm 2 with m_test samples on every validation and test point, "
    "feature learners on their own features; learners that need the kernel and regret_B are "
    "refused)",
    choices=("exact", "free"),
    listable=False,
)
M_TEST_RULES = ("theorem1", "train")
M_TEST_SWEEP = Param(
    "m_test_sweep",
    "int",
    None,
    "a list of m: for every kernel-expansion predictor, the Algorithm-2 test NMSE on the first "
    "n_test_estimated test points with each m (columns test_nmse_estimated_m<m>)",
    min=1,
)
# ``evaluation.estimate_draws`` (docs/protocol.md §5.7): the random stream of every Algorithm-2
# estimate. Another stream changes every estimated number (the same law, other draws), so it is
# part of the record digest when given, and left out of the resolved config at its default.
ESTIMATE_DRAWS = Param(
    "estimate_draws",
    "str",
    MULTINOMIAL,
    "the random stream of Algorithm-2 estimates (validation, test, m_test_sweep, kernel: free): "
    "multinomial (each point's index counts Multinomial(m_test, q), numpy's stream; every "
    "committed number), inverse_cdf_v1 (iid indices by inverse-CDF sampling of q, in draw "
    "order; the same law, other numbers, faster) or inverse_cdf_v2 (the same with a "
    "counter-based stream keyed by the cell's generator; the same law to 2^-32, other numbers, "
    "faster still)",
    choices=DRAWS,
    listable=False,
)
NEW_EVALUATION_KEYS = ("select_on", KERNEL.name, M_TEST_SWEEP.name, ESTIMATE_DRAWS.name)


def check_m_test(raw: Any, problems: list) -> int | str | dict | None:
    """``evaluation.m_test``: an integer >= 1, ``theorem1`` (Theorem 1.3's
    ``ceil(c B^4 T log(BT))``), ``train`` (the cell's training ``m``) or ``{per_T: c}``
    (``ceil(c T)``, ``c > 0``); ``None`` and a problem naming the key otherwise."""
    path = "evaluation.m_test"
    if isinstance(raw, str) and raw in M_TEST_RULES:
        return raw
    if isinstance(raw, dict):
        for key in raw:
            if key != "per_T":
                problems.append(unknown(key, ["per_T"], f"{path}.{key_text(key)}"))
        if "per_T" not in raw:
            problems.append((path, "a mapping must be {per_T: c} with a number c > 0"))
            return None
        c = check_scalar(
            Param("per_T", "float", None, "", min=0, min_exclusive=True, listable=False),
            raw["per_T"],
            f"{path}.per_T",
            problems,
        )
        return None if c is None or len(raw) != 1 else {"per_T": c}
    if isinstance(raw, int) and not isinstance(raw, bool):
        return check_scalar(EVALUATION_PARAMS[0], raw, path, problems)
    problems.append(
        (
            path,
            "must be an integer >= 1, 'theorem1', 'train' or a mapping {per_T: c} with c > 0, "
            f"got {show(raw)}",
        )
    )
    return None


def m_test_value(rule: int | str | Mapping, T: int, args: Mapping, hyper: Mapping) -> int:
    """A cell's Algorithm-2 samples a point under ``evaluation.m_test`` (``rule``): an integer as
    given; ``{per_T: c}``: ``ceil(c T)``; ``train``: the cell's training ``m`` (its ``fit``
    keywords ``args``), for a learner without one as ``theorem1``; ``theorem1``: Theorem 1.3's
    ``m = ceil(c B^4 T log(BT))`` (:func:`~ilnrun.learners.shrinking_gradient.theory_preset`,
    the one place of the formula) with the cell's ``T``, its ``B`` and Shrinking Gradient's
    ``c`` (the setting's ``hyper``, else the parameter's default; ``B = 1`` and the default
    ``c`` for a learner without ``m``)."""
    from ..learners.shrinking_gradient import C_DEFAULT, theory_preset

    if isinstance(rule, int):
        return rule
    if isinstance(rule, Mapping):
        return max(1, math.ceil(rule["per_T"] * T))
    train_m = args.get("m")
    if rule == "train" and train_m is not None:
        return int(train_m)
    B = float(args.get("B") or 1.0) if train_m is not None else 1.0
    c = hyper.get("c") if train_m is not None else None
    return theory_preset(B, T, C_DEFAULT if c is None else float(c))[1]


def plain_evaluation(raw_eval: Any) -> Any:
    """The raw ``evaluation`` section without an ``m_test`` rule (:func:`add_evaluation_keys`
    checks it), for the plain section check."""
    if isinstance(raw_eval, dict) and "m_test" in raw_eval:
        m = raw_eval["m_test"]
        if not isinstance(m, int) or isinstance(m, bool):
            return {k: v for k, v in raw_eval.items() if k != "m_test"}
    return raw_eval


def add_evaluation_keys(raw_eval: Any, cfg: dict, problems: list) -> None:
    """Store ``evaluation.kernel`` (when ``free``), an ``m_test`` rule, a non-default
    ``estimate_draws`` and a non-empty ``m_test_sweep`` of the raw ``evaluation`` section in
    ``cfg["evaluation"]``."""
    if not isinstance(raw_eval, dict):
        return
    ev = cfg["evaluation"]
    if "m_test" in raw_eval and plain_evaluation(raw_eval) is not raw_eval:
        m = check_m_test(raw_eval["m_test"], problems)
        if m is not None:
            ev["m_test"] = m
    if "kernel" in raw_eval:
        kernel = check_scalar(KERNEL, raw_eval["kernel"], "evaluation.kernel", problems)
        if kernel is not None and kernel != KERNEL.default:
            ev["kernel"] = kernel
    if "estimate_draws" in raw_eval:
        path, draws = "evaluation.estimate_draws", raw_eval["estimate_draws"]
        if isinstance(draws, str):
            draws = check_scalar(ESTIMATE_DRAWS, draws, path, problems)
        else:  # (check_scalar's message would not name the streams)
            problems.append((path, f"must be one of {', '.join(DRAWS)}, got {show(draws)}"))
            draws = None
        if draws is not None and draws != ESTIMATE_DRAWS.default:
            ev["estimate_draws"] = draws
    if "m_test_sweep" in raw_eval:
        path = "evaluation.m_test_sweep"
        sweep = raw_eval["m_test_sweep"]
        if sweep is None:
            return
        sweep = check_value(
            M_TEST_SWEEP, sweep if isinstance(sweep, list) else [sweep], path, problems
        )
        if sweep and all(v is not None for v in sweep):
            ev["m_test_sweep"] = [int(v) for v in sweep]


def check_protocol(cfg: dict, problems: list) -> None:
    """What the evaluation protocol needs from the other sections: under ``kernel: free`` no
    learner that needs the kernel and no ``regret_B``; ``budget.match: total`` only under
    ``kernel: free`` with ``m_test: train`` (its unit costs count Algorithm 2 at the training
    m on every validation and test point; docs/budgets.md §6)."""
    ev = cfg["evaluation"]
    free = ev.get("kernel", KERNEL.default) == "free"
    if free:
        for name in cfg["methods"]:
            if LEARNERS[name].needs_kernel:
                problems.append(
                    (
                        f"methods.{name}",
                        "needs the closed-form kernel, which evaluation.kernel: free forbids "
                        "(leave it out, or use kernel: exact)",
                    )
                )
        if ev.get("regret_B") is not None:
            problems.append(
                (
                    "evaluation.regret_B",
                    "the regret uses the closed-form kernel, which evaluation.kernel: free "
                    "forbids (set it to null)",
                )
            )
    for name in cfg["methods"] if cfg["budget"]["match"] == "total" else ():
        size = LEARNERS[name].budget
        if size is not None and not size.counts_scoring:
            problems.append(
                (
                    f"methods.{name}",
                    "its budget size declares cost(match, T), without the points scored that "
                    "budget.match: total needs (cost(match, T, n_eval))",
                )
            )
    if cfg["budget"]["match"] == "total" and not (free and ev["m_test"] == "train"):
        problems.append(
            (
                "budget.match",
                "total matches training + validation + test evaluations of kernel-free "
                "predictors: it needs evaluation.kernel: free and evaluation.m_test: train",
            )
        )


# ----------------------------------------------------------------------------------------------
# the loss (docs/protocol.md §12): ``loss`` for the experiment, ``methods.<learner>.loss`` for one
# learner; stored only where it is not the square loss (a learner's section holds the loss it
# learns with: the cells' keys and the ``fit`` keyword ``loss``)


def loss_param() -> Param:
    """The ``loss`` key: one of the registered losses (read when asked: a loss registered later
    is a choice too)."""
    return Param(
        "loss",
        "str",
        DEFAULT_LOSS,
        "the loss every learner learns with and is scored on (a learner's own methods.<name>.loss "
        "overrides it): " + ", ".join(LOSSES),
        choices=tuple(LOSSES),
        listable=False,
    )


def add_losses(raw: Mapping, cfg: dict, problems: list) -> None:
    """Resolve the experiment's ``loss`` and each learner's: ``methods.<name>.loss`` where given,
    else the experiment's. A learner's loss must be one its spec lists
    (``LearnerSpec.supported_losses``), and a loss on ±1 labels (``labels: pm1``) needs a dataset
    whose labels are ±1 (``DatasetSpec.labels``): otherwise a problem naming the key that set it.
    A loss other than the square loss is stored in ``cfg["loss"]`` and in the learner's section
    (so it reaches the cells' keys and ``fit``); the square loss nowhere."""
    param = loss_param()
    top = check_scalar(param, raw.get("loss", DEFAULT_LOSS), "loss", problems)
    if top is None:
        return
    if top != DEFAULT_LOSS:
        cfg["loss"] = top
    ds = cfg.get("dataset")
    kind = ds.get("kind") if isinstance(ds, dict) else None
    labels = getattr(DATASETS[kind], "labels", "real") if kind in DATASETS else None
    methods = raw.get("methods") if isinstance(raw.get("methods"), dict) else {}
    for name, section in cfg["methods"].items():
        mraw = methods.get(name)
        if isinstance(mraw, dict) and "loss" in mraw:
            path = f"methods.{name}.loss"
            loss = check_scalar(param, mraw["loss"], path, problems)
            if loss is None:
                continue
        else:
            path, loss = "loss", top
        spec = LEARNERS[name]
        supported = spec.supported_losses
        if loss not in supported:
            why = spec.why_not_loss(loss) if spec.why_not_loss is not None else ""
            problems.append(
                (
                    path,
                    f"{name} learns with the loss{'es' if len(supported) > 1 else ''} "
                    f"{', '.join(supported)}, not {show(loss)}"
                    + (f": {why}" if why else "")
                    + ("" if path != "loss" else f" (set methods.{name}.loss to one of them)"),
                )
            )
            continue
        if labels is not None and LOSSES[loss].labels == "pm1" and labels != "pm1":
            problems.append(
                (
                    path,
                    f"the loss {show(loss)} needs ±1 labels; dataset {kind!r} has real labels "
                    f"(use a loss for real labels: "
                    f"{', '.join(n for n, s in LOSSES.items() if s.labels == 'real')})",
                )
            )
            continue
        if loss != DEFAULT_LOSS:
            section["loss"] = loss
