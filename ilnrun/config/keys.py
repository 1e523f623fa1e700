"""The ``evaluation`` section's keys, and two keys that must not change a config resolved without
them (docs/protocol.md §5.2-§5.3): ``evaluation.select_on`` and ``methods.<learner>.eta_scale``.
Each of the two is stored in the resolved config only when it differs from its default, so cell
ids, record digests and resumes of configs that do not use them are those of before the keys
existed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..learners import LEARNERS
from ..learners.base import ETA_SCALE
from ..params import Param, check_scalar, check_section, key_text, unknown

EVALUATION_PARAMS = (
    # Defaults: the Algorithm-2 test estimate costs 2 m_test n_test_estimated = 40 000 feature
    # evaluations per cell whatever the size of the test split: one training pass of T = 200
    # rounds at m = 101 (2 m (T - 1)), a tenth of it at T = 2000 or m = 1000.
    Param(
        "m_test",
        "int",
        100,
        "Algorithm-2 samples per point for estimated predictions (noisy at 100: raise it, e.g. "
        "to the training m, for a test_loss_estimated that compares with the online loss)",
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


def check_method(name: str, raw: Any, problems: list) -> dict:
    """A learner's section; a learner with ``eta`` also takes ``eta_scale``
    (docs/protocol.md §5.3), kept in the resolved config only when it is not ``none``."""
    spec = LEARNERS[name]
    path = f"methods.{name}"
    has_eta = ETA_SCALE in spec.config_params
    skip = ("eta_scale",) if has_eta else ()
    out = check_section(raw, spec.params, path, problems, skip=skip)
    if has_eta and isinstance(raw, dict) and "eta_scale" in raw:
        scale = check_scalar(ETA_SCALE, raw["eta_scale"], f"{path}.eta_scale", problems)
        if scale is not None and scale != ETA_SCALE.default:
            out["eta_scale"] = scale
    return out


def add_select_on(raw_eval: Any, cfg: dict, problems: list) -> None:
    """Store a valid, non-default ``evaluation.select_on`` of the raw ``evaluation`` section in
    ``cfg["evaluation"]`` (:func:`check_select_on`; the learners are ``cfg["methods"]``)."""
    if isinstance(raw_eval, dict) and "select_on" in raw_eval:
        select_on = check_select_on(raw_eval["select_on"], cfg["methods"], problems)
        if select_on is not None:
            cfg["evaluation"]["select_on"] = select_on
