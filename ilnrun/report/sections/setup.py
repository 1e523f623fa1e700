"""The setup (data, feature map, budgets, grids, evaluation) and every choice made where the
paper is silent — the dataset's, the feature map's and the learners' own sentences."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import product

from ...budget import Budget, derive, setting_size
from ...cell import DIVERGED_FACTOR
from ...config.grid import as_list, method_grid
from ...config.keys import EDGES_OK, grid_params
from ...config.schema import data_lines
from ...datasets import DATASETS
from ...datasets.base import NOISE_CHOICE
from ...features import FEATURE_MAPS
from ...learners import LEARNERS, budgeted
from ...learners.base import LearnerSpec
from ...losses import LOSSES
from ..data import ONE_REPETITION, ReportData, label, m_test_text, md_table
from .selection import selection_sentence

INTERVALS = (
    "Intervals are 95% Student-t intervals over repetitions; verdicts use paired differences "
    "(same data within a repetition)."
)
PROTOCOL_CHOICES = (
    "One online pass in the same order for every learner.",
    "Hyperparameters are selected per (learner, dataset setting, budget) on the mean "
    "validation loss over repetitions; settings with any diverged repetition are skipped; every "
    "grid point stays in `runs.csv`.",
    "`test_loss` is `½ mean (f(x) − y)²` of the learned predictor on the test set, evaluated "
    "exactly where the feature map has a closed-form kernel (kernel expansions `Σ α_i k(x_i, x)`)"
    " or on the learner's own features (feature expansions).",
    INTERVALS,
    f"A cell counts as diverged (and its setting is skipped by selection) when a prediction "
    f"exceeds 10⁶ in magnitude or is not finite, when a loss is not finite, or when its test "
    f"loss exceeds {DIVERGED_FACTOR:g} × the zero predictor's (`diverged_reason` in `runs.csv` "
    f"says which).",
    "Yardsticks: the zero predictor (`f = 0`, where every learner starts) and the mean predictor "
    "(the training-label mean predicted everywhere, the best constant a learner could know); "
    "NMSE = MSE / var(y_test), 1.0 = predicting the test mean.",
)


def render(r: ReportData) -> list[str]:
    cfg = r.cfg
    ds, b, ev = cfg["dataset"], cfg["budget"], cfg["evaluation"]
    T_values = ds["T"] if isinstance(ds["T"], list) else [ds["T"]]
    L = [
        "## Setup",
        "",
        f"- Dataset `{ds['kind']}`: "
        + ", ".join(f"{k} = {v}" for k, v in ds.items() if k != "kind")
        + f"; {cfg['repetitions']} repetitions, root seed {cfg['seed']}.",
    ]
    for path, info in (cfg.get("inputs") or {}).items():
        what = f"Data read: {info['source']}" if "source" in info else f"Input file `{path}`"
        L.append(f"- {what}: {info['bytes']:,} bytes, SHA-256 `{info['sha256']}`.")
    L += [f"- Data used: {line}." for line in data_lines(cfg)]
    L += [
        "- Feature map: " + ", ".join(f"{k} = {v}" for k, v in cfg["feature_map"].items()) + ".",
        f"- Budget convention `{b['match']}`; Doubly SGD's `k` ∈ {r.ks}. Derived sizes:",
        "",
    ]
    specs = [s for s in budgeted() if s.name in cfg["methods"]]
    rows = []
    for T in T_values:
        for k in r.ks:
            d = derive(b["match"], k, int(T), _scored_points(cfg, T))
            rows.append(
                [T, k, f"{d.target:,}"] + [size_cell(s, cfg["methods"][s.name], d) for s in specs]
            )
    head = ["T", "k", f"target ({b['match']})"] + [f"{s.budget.name} ({s.short})" for s in specs]
    L += [md_table(head, rows), ""]
    for i, spec in enumerate(specs):  # a learner whose sizes differ by setting: how
        cells = [row[3 + i] for row in rows if isinstance(row[3 + i], str)]
        if cells:
            L.append(size_note(spec, any("no budget" in c for c in cells)))
    L.append("- Grids (every point is run for every setting and repetition):")
    for m, params in cfg["methods"].items():
        L += grid_lines(m, params, [int(T) for T in T_values])
    L += [
        f"- Evaluation (`evaluation.kernel: {ev.get('kernel', 'exact')}`): "
        f"`test_loss_estimated` uses Algorithm 2 with {m_test_text(ev['m_test'])} samples per "
        f"point (the value used in each row: column `m_test`) on "
        f"{ev.get('n_test_estimated', 'all')} test points.",
        f"- Selection: {selection_sentence(r)}",
        "",
        "## Choices where the paper is silent",
        "",
    ]
    L += [f"- {c}" for c in DATASETS[ds["kind"]].choices if applies(c, ds)]
    L.append(f"- {FEATURE_MAPS[cfg['feature_map']['kind']].choices}")
    L += [f"- {c if r.tested or c != INTERVALS else ONE_REPETITION}" for c in PROTOCOL_CHOICES]
    L += loss_lines(r)
    for m in r.methods:
        L += [f"- {c}" for c in LEARNERS[m].choices]
    return L + [""]


def size_cell(spec: LearnerSpec, params: Mapping, budget: Budget) -> int | str:
    """A budgeted learner's cell of the derived-sizes table: the budget's size, or, where the
    learner's grid sets the parameters that change it (``BudgetSize.setting_params``: Doubly
    SGD's ``batch`` and ``block``) to other values than their defaults, the size of each of
    their values in the grid, in grid order: ``4 (batch 1); 31 (batch 8)``. A batch setting's
    size is the target over its own unit cost, rounded by the budget's rule
    (:func:`ilnrun.budget.setting_size`); a setting that fixes its size (Doubly SGD's
    ``block``) takes no budget and is said to (docs/budgets.md §4). A grid at the defaults
    gives the plain size, so the table of such a run reads as before these parameters."""
    name, shaped = spec.budget.name, spec.budget.setting_params
    plain = budget.size(name)
    if not shaped:
        return plain
    sizes: dict[tuple, tuple[int, bool]] = {}  # values of the shaping parameters -> size, fixed
    for h in method_grid(spec.name, dict(params)):
        values = tuple(h.get(p) for p in shaped)
        if values in sizes:
            continue
        if spec.takes_budget(h):
            sizes[values] = (setting_size(budget, spec.name, h), False)
        else:
            sizes[values] = (spec.fit_arguments(h, None, budget.T)[name], True)
    if all(v is None for values in sizes for v in values):
        return plain
    default = {p.name: p.default for p in spec.params}
    parts = []
    for values, (size, fixed) in sizes.items():
        named = [
            f"{p} {_value(v if v is not None else default.get(p))}"
            for p, v in zip(shaped, values, strict=True)
            if v is not None or default.get(p) is not None
        ]
        what = ", ".join(named) + ("; fixed by the setting, no budget" if fixed else "")
        parts.append(f"{size} ({what})" if what else str(size))
    return "; ".join(parts)


def _value(v: object) -> str:
    """A setting's value as the table names it: ``2`` for ``2.0``."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def size_note(spec: LearnerSpec, fixed: bool = False) -> str:
    """The line under the derived-sizes table for a learner whose cell gives a size per value of
    its ``setting_params`` (:func:`size_cell`); ``fixed``: some setting fixes its size."""
    name = spec.budget.name
    params = ", ".join(f"`{p}`" for p in spec.budget.setting_params)
    why = f" ({spec.budget.setting_doc})" if spec.budget.setting_doc else ""
    return (
        f"- {spec.label}'s {name} per value of {params} in its grid: the target divided by what "
        f"one unit of {name} spends in that setting, rounded by the same rule{why}"
        + (f"; a setting that fixes {name} itself takes no budget" if fixed else "")
        + " (docs/budgets.md §4)."
    )


def grid_lines(method: str, params: dict, Ts: list[int]) -> list[str]:
    """A learner's grid as the report prints it: the parameters some setting uses (a parameter
    every setting leaves unused, e.g. ``eta`` under Shrinking Gradient's theory preset, is named
    as unused), then the learner's own notes on what it derives per T (the theory preset's
    ``eta = B/√T`` and ``m``)."""
    spec = LEARNERS[method]
    edges_ok = params.get(EDGES_OK) or {}
    params = grid_params(params)
    lists = {k: v if isinstance(v, list) else [v] for k, v in params.items()}
    settings = [dict(zip(lists, combo, strict=True)) for combo in product(*lists.values())]
    unused = set.intersection(*(set(spec.unused(h)) for h in settings)) if settings else set()
    text = ", ".join(f"{k} = {v}" for k, v in params.items() if k not in unused)
    if unused:
        text += f" ({', '.join(k for k in params if k in unused)}: not used by any setting)"
    L = [f"  - {label(method)}: {text}"]
    if params.get("eta_scale") == "sqrt_T":
        etas = [e for e in lists.get("eta", []) if e is not None]
        per_T = "; ".join(f"T = {T}: " + ", ".join(f"{e / T**0.5:.3g}" for e in etas) for T in Ts)
        L.append(f"    - eta in units of 1/√T (`eta_scale: sqrt_T`), step sizes {per_T}")
    if spec.notes is not None:
        L += [f"    - {note}" for note in spec.notes(settings, Ts)]
    L += [
        f"    - a selection at the edge of the {k} grid is accepted (`edges_ok`): {why}"
        for k, why in edges_ok.items()
    ]
    return L


# the max-label scaling sentence of the synthetic datasets: replaced by ``rkhs_norm``'s own
MAX_LABEL_SCALING = "`1 / max_i |y_i|`"


def applies(choice: str, ds: dict) -> bool:
    """Whether a dataset's choice sentence describes this setting: with ``rkhs_norm`` set the
    labels are not scaled by their largest training value (the target is scaled to that RKHS
    norm instead, which the dataset's own ``rkhs_norm`` sentence says); the label-noise
    sentence only where some ``noise`` is above 0."""
    if ds.get("rkhs_norm") is not None and MAX_LABEL_SCALING in choice:
        return False
    noise = ds.get("noise") or 0.0
    return not (choice.startswith(NOISE_CHOICE) and not any(as_list(noise)))


def _scored_points(cfg: Mapping, T: int) -> int:
    """Validation + test points of the first dataset setting with ``T`` rounds (what the
    ``total`` budget convention counts; 0 when none is found)."""
    from ... import cost
    from ...config import grid

    for setting in grid.dataset_settings(cfg):
        t, n_val, n_test, _ = cost.setting_sizes(setting, cfg.get("data_used", []))
        if t == int(T):
            return n_val + n_test
    return 0


def loss_lines(r: ReportData) -> list[str]:
    """What the losses are, when a learner learns with another loss than the square loss
    (docs/protocol.md §12); nothing otherwise (reports of square-loss results are unchanged)."""
    losses = r.losses
    if set(losses.values()) <= {"square"}:
        return []
    out = []
    for name in dict.fromkeys(losses.values()):
        spec = LOSSES.get(name)
        who = ", ".join(label(m) for m, v in losses.items() if v == name)
        what = spec.summary if spec is not None else name
        out.append(
            f"- Loss of {who}: {what}; its `test_loss`, `val_loss` and online loss are this "
            "loss, its mean predictor is this loss's best constant."
        )
    out.append(
        "- `test_error`: the fraction of test points whose label's sign differs from the "
        "prediction's (a prediction of 0 counts as an error)."
    )
    mixed = r.mixed_losses()
    return out + ([f"- {mixed}"] if mixed else [])
