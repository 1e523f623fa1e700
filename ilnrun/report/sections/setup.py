"""The setup (data, feature map, budgets, grids, evaluation) and every choice made where the
paper is silent — the dataset's, the feature map's and the learners' own sentences."""

from __future__ import annotations

from ...budget import derive
from ...cell import DIVERGED_FACTOR
from ...config.schema import data_lines
from ...data import DATASETS
from ...features import FEATURE_MAPS
from ...learners import LEARNERS, budgeted
from ..data import ReportData, label, md_table

PROTOCOL_CHOICES = (
    "One online pass in the same order for every learner.",
    "Hyperparameters are selected per (learner, dataset setting, budget) on the mean "
    "validation loss over repetitions; settings with any diverged repetition are skipped; every "
    "grid point stays in `runs.csv`.",
    "`test_loss` is `½ mean (f(x) − y)²` of the learned predictor on the test set, evaluated "
    "exactly where the feature map has a closed-form kernel (kernel expansions `Σ α_i k(x_i, x)`)"
    " or on the learner's own features (feature expansions).",
    "Intervals are 95% Student-t intervals over repetitions; verdicts use paired differences "
    "(same data within a repetition).",
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
        L.append(f"- Input file `{path}`: {info['bytes']:,} bytes, SHA-256 `{info['sha256']}`.")
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
            d = derive(b["match"], k, int(T))
            rows.append([T, k, f"{d.target:,}"] + [d.size(s.budget.name) for s in specs])
    head = ["T", "k", f"target ({b['match']})"] + [f"{s.budget.name} ({s.short})" for s in specs]
    L += [
        md_table(head, rows),
        "",
        "- Grids (every point is run for every setting and repetition):",
    ]
    for m, params in cfg["methods"].items():
        L.append(f"  - {label(m)}: " + ", ".join(f"{k} = {v}" for k, v in params.items()))
    L += [
        f"- Evaluation: `test_loss_estimated` uses `m_test` = {ev['m_test']} Algorithm-2 "
        f"samples per point on {ev.get('n_test_estimated', 'all')} test points.",
        "",
        "## Choices where the paper is silent",
        "",
    ]
    L += [f"- {c}" for c in DATASETS[ds["kind"]].choices]
    L.append(f"- {FEATURE_MAPS[cfg['feature_map']['kind']].choices}")
    L += [f"- {c}" for c in PROTOCOL_CHOICES]
    for m in r.methods:
        L += [f"- {c}" for c in LEARNERS[m].choices]
    return L + [""]
