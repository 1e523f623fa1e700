"""``ilnrun report``: a Markdown report generated from a results directory.

The report states the resolved config and every choice the tool makes where the paper is silent,
shows the figures, tabulates the selected settings (mean ± 95% interval), and turns the paper's
claim — Shrinking Gradient reaches a lower loss than Doubly SGD and Fixed-Random at an equal
budget — into verdict rows measured by **paired** differences: all learners of a repetition see
the same data, so for each (dataset setting, budget) we compare ``test_loss(SG) - test_loss(X)``
repetition by repetition, with a 95% t-interval on the mean difference.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .budget import derive
from .results import t975

LABELS = {
    "shrinking_gradient": "Shrinking Gradient",
    "doubly_sgd": "Doubly SGD",
    "fixed_random": "Fixed-Random",
    "kernel_ogd": "Kernel OGD (oracle)",
}
BUDGETED = ("shrinking_gradient", "doubly_sgd", "fixed_random")

DATASET_CHOICES = {
    "clipped_gaussian": [
        "Inputs `x = max(N(0, I_D), 0)`: standard Gaussian with negative values clipped to 0 "
        "(paper Section 6).",
        "Target: `a = Σ_{j∈S} c_j x_j` with `S` a uniformly random subset of `sparsity` training "
        "indices and `c_j ~ N(0, 1)`; labels `y = X a` (no noise). The paper says only 'a random "
        "sparse linear combination of the training points'.",
        "Labels are brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the "
        "training set and applied to every split (validation and test labels may slightly "
        "exceed 1). The paper does not say how labels are scaled.",
        "Rows are not normalized unless `normalize_rows: true`.",
        "Validation and test sets are fresh draws from the same distribution, labelled by the "
        "same `a`; all learners and all grid points of a repetition share them.",
    ],
}
FEATURE_CHOICES = {
    "coordinate": "Features: `ψ(x; w) = x[w]`, `w ~ Uniform{0..D−1}`, kernel `k(x, x') = x·x'/D`"
    " (so `k(x, x) ≈ 1/2` on clipped-Gaussian data and `|ψ| ≤ 1` is not enforced; no √D "
    "scaling, so step sizes are comparable across D).",
    "relu": "Features: `ψ(x; w) = √2 max(0, w·x)`, `w ~ N(0, I)`; arc-cosine kernel of order 1.",
    "fourier": "Features: `ψ(x; w, b) = √2 cos(w·x + b)`, `w ~ N(0, σ⁻² I)`, `b ~ U[0, 2π)`; "
    "Gaussian RBF kernel.",
}
PROTOCOL_CHOICES = [
    "One online pass in the same order for every learner; the online prediction of Shrinking "
    "Gradient is its Algorithm-2 estimate `E_t`.",
    "Shrinking Gradient uses the gradient-descent sign `α_t = η(y_t − E_t)` (the paper prints "
    "`−η(y_t − E_t)`, which is ascent; see the README's erratum).",
    "Hyperparameters are selected per (learner, dataset setting, budget) on the mean "
    "validation loss over repetitions; settings with any diverged repetition are skipped; every "
    "grid point stays in `runs.csv`.",
    "`test_loss` is `½ mean (f(x) − y)²` of the learned predictor evaluated **exactly** on the "
    "test set (for Shrinking Gradient and the oracle `Σ α_i k(x_i, x)` with the closed-form "
    "kernel); `test_loss_estimated` is what Algorithm 2 with `m_test` samples gives instead; "
    "`test_loss_avg` is Shrinking Gradient's averaged predictor (Corollary 1).",
    "Intervals are 95% Student-t intervals over repetitions; verdicts use paired differences "
    "(same data within a repetition).",
    "Kernel OGD uses the exact kernel and no feature budget; it is a reference, not a competitor.",
]


def _fmt(mean: float, ci: float, digits: int = 4) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    if math.isinf(mean):
        return "diverged"
    s = f"{mean:.{digits}g}"
    if ci is not None and not (isinstance(ci, float) and math.isnan(ci)):
        s += f" ± {ci:.2g}"
    return s


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def x_axis(cfg: dict) -> str | None:
    """The first dataset parameter given as a list (the experiment's x axis), if any."""
    for k, v in cfg["dataset"].items():
        if isinstance(v, list) and len(v) > 1:
            return k
    return None


def paired(runs: pd.DataFrame, a: str, b: str, keys: dict) -> dict:
    """Mean and 95% CI of ``test_loss(a) − test_loss(b)`` over repetitions (selected settings),
    restricted to rows matching ``keys``."""
    sel = runs[runs["selected"]]
    for k, v in keys.items():
        sel = sel[sel[k] == v]
    la = sel[sel["method"] == a].set_index("repetition")["test_loss"]
    lb = sel[sel["method"] == b].set_index("repetition")["test_loss"]
    d = (la - lb).dropna()
    d = d[np.isfinite(d)]
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    ci = t975(n - 1) * float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    return {"n": n, "mean": mean, "ci": ci, "a": float(la.mean()), "b": float(lb.mean())}


def _verdict_word(p: dict) -> str:
    if p["n"] == 0 or math.isnan(p["mean"]):
        return "no data"
    sig = not math.isnan(p["ci"]) and abs(p["mean"]) > p["ci"]
    if p["mean"] < 0:
        return "SG lower" + (" (significant)" if sig else " (not significant)")
    return "SG higher" + (" (significant)" if sig else " (not significant)")


def _claim_summary(words: list[str]) -> str:
    n = len(words)
    lower = sum(w.startswith("SG lower") for w in words)
    sig_lower = sum(w == "SG lower (significant)" for w in words)
    sig_higher = sum(w == "SG higher (significant)" for w in words)
    if n and sig_lower == n:
        verdict = "holds"
    elif sig_higher == 0 and lower == n:
        verdict = "holds in direction, not always significantly"
    elif sig_higher > 0 and sig_lower == 0:
        verdict = "does not hold"
    else:
        verdict = "mixed"
    return (
        f"{verdict} — SG lower at {lower}/{n} settings ({sig_lower} significantly), "
        f"significantly higher at {sig_higher}/{n}"
    )


def build_report(results_dir: Path, out_dir: Path) -> Path:
    """Write ``out_dir/REPORT.md`` (and copy the figures next to it); return its path."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load((results_dir / "config.yaml").read_text())
    meta = json.loads((results_dir / "meta.json").read_text())
    runs = pd.read_csv(results_dir / "runs.csv")
    summary = pd.read_csv(results_dir / "summary.csv")
    name = cfg["name"]
    xa = x_axis(cfg)
    ks = sorted(summary["dsgd_k"].dropna().astype(int).unique())
    methods = [m for m in LABELS if m in set(summary["method"])]

    figures = []
    for stem in ("figure1", "budget_sweep", "curves"):
        src = results_dir / f"{stem}.png"
        if src.exists():
            if src.resolve() != (out_dir / src.name).resolve():
                shutil.copyfile(src, out_dir / src.name)
            figures.append(src.name)

    L: list[str] = [f"# {name}: report", ""]
    cfg_path = meta.get("config_path") or f"configs/{name}.yaml"
    L += [
        f"_Generated by `ilnrun report` from `{results_dir}` — do not edit by hand. "
        f"Results of git commit `{(meta.get('git_commit') or 'unknown')[:12]}`, run "
        f"{meta.get('start')} → {meta.get('end')} with {meta.get('jobs')} worker(s)._",
        "",
        "Regenerate:",
        "",
        "```",
        f"ilnrun run {cfg_path} --jobs 2",
        f"ilnrun plot {results_dir}",
        f"ilnrun report {results_dir} --out {out_dir}",
        "```",
        "",
    ]
    if cfg.get("description"):
        L += [cfg["description"].strip(), ""]

    # --- setup -------------------------------------------------------------------------------
    ds = cfg["dataset"]
    T_values = ds["T"] if isinstance(ds["T"], list) else [ds["T"]]
    L += ["## Setup", ""]
    L.append(
        f"- Dataset `{ds['kind']}`: "
        + ", ".join(f"{k} = {v}" for k, v in ds.items() if k != "kind")
        + f"; {cfg['repetitions']} repetitions, root seed {cfg['seed']}."
    )
    L.append(f"- Feature map `{cfg['feature_map']['kind']}`.")
    b = cfg["budget"]
    L.append(f"- Budget convention `{b['match']}`; Doubly SGD's `k` ∈ {ks}. Derived sizes:")
    rows = []
    for T in T_values:
        for k in ks:
            d = derive(b["match"], int(k), int(T))
            rows.append([T, k, f"{d.target:,}", d.m, d.k, d.r])
    L += [
        "",
        _md_table(["T", "k", f"target ({b['match']})", "m (SG)", "k (DSGD)", "r (FR)"], rows),
        "",
    ]
    L.append("- Grids (every point run for every setting and repetition):")
    for m, params in cfg["methods"].items():
        L.append(f"  - {LABELS[m]}: " + ", ".join(f"{k} = {v}" for k, v in params.items()))
    ev = cfg["evaluation"]
    L.append(
        f"- Evaluation: `m_test` = {ev['m_test']} Algorithm-2 samples per test point on "
        f"{ev.get('n_test_estimated', 'all')} test points for `test_loss_estimated`."
    )
    L += ["", "## Choices where the paper is silent", ""]
    L += [f"- {c}" for c in DATASET_CHOICES.get(ds["kind"], [])]
    L.append(f"- {FEATURE_CHOICES.get(cfg['feature_map']['kind'], '')}")
    L += [f"- {c}" for c in PROTOCOL_CHOICES]
    L.append("")

    # --- counters ------------------------------------------------------------------------------
    L += ["## Budgets as counted by the learners", ""]
    rows = []
    bud = runs[runs["method"].isin(BUDGETED)]
    for (m, k), g in bud.groupby(["method", "dsgd_k"]):
        dev = (g["train_evals"] - g["budget_target"]).abs() / g["budget_target"]
        rows.append(
            [
                LABELS[m],
                int(k),
                f"{int(g['budget_target'].iloc[0]):,}",
                f"{g['train_evals'].min():,}–{g['train_evals'].max():,}",
                f"{100 * dev.max():.2f}%",
                f"{g['features_sampled'].min():,}–{g['features_sampled'].max():,}",
                int(g["shrinks"].sum()),
            ]
        )
    L += [
        _md_table(
            [
                "learner",
                "k",
                "target",
                "train_evals (min–max)",
                "max deviation",
                "features_sampled",
                "shrinks (all cells)",
            ],
            rows,
        ),
        "",
    ]
    div = runs.groupby("method")["diverged"].sum().astype(int)
    L.append(
        "Diverged cells per learner (all grid points): "
        + ", ".join(f"{LABELS[m]} {div.get(m, 0)}" for m in methods)
        + "."
    )
    L.append("")

    # --- figures -------------------------------------------------------------------------------
    if figures:
        L += ["## Figures", ""]
        L += [f"![{f}]({f})" for f in figures]
        L.append("")

    # --- tables --------------------------------------------------------------------------------
    keyname = xa or "dsgd_k"
    for metric, title in (
        ("test_loss", "Test loss"),
        ("online_loss", "Online loss"),
        ("test_loss_avg", "Test loss of SG's averaged predictor"),
        ("test_loss_estimated", "Test loss of SG with Algorithm-2 test estimates"),
    ):
        cols = methods if metric in ("test_loss", "online_loss") else ["shrinking_gradient"]
        if (
            metric not in ("test_loss", "online_loss")
            and not summary[f"{metric}_mean"].notna().any()
        ):
            continue
        L += [f"## {title} (mean ± 95% CI over repetitions, selected settings)", ""]
        for k in ks:
            sub = summary[(summary["dsgd_k"] == k) | summary["dsgd_k"].isna()]
            xs = sorted(sub[keyname].dropna().unique()) if xa else [None]
            rows = []
            for x in xs:
                row = [x if x is not None else "—"]
                for m in cols:
                    s = sub[sub["method"] == m]
                    if xa:
                        s = s[s[xa] == x]
                    row.append(
                        _fmt(s[f"{metric}_mean"].iloc[0], s[f"{metric}_ci95"].iloc[0])
                        if len(s)
                        else "—"
                    )
                rows.append(row)
            L += [
                f"Budget k = {k}:",
                "",
                _md_table([keyname] + [LABELS[m] for m in cols], rows),
                "",
            ]

    # --- selected settings ---------------------------------------------------------------------
    L += ["## Selected hyperparameters", ""]
    rows = []
    for m in methods:
        for k in ks if m in BUDGETED else [None]:
            s = summary[summary["method"] == m]
            s = s[s["dsgd_k"] == k] if k is not None else s
            counts = s["setting"].value_counts()
            rows.append(
                [
                    LABELS[m],
                    k if k is not None else "—",
                    "; ".join(f"{st} (×{c})" for st, c in counts.items()),
                ]
            )
    L += [_md_table(["learner", "k", "selected setting (number of dataset settings)"], rows), ""]

    # --- verdict -------------------------------------------------------------------------------
    if "shrinking_gradient" in methods:
        L += [
            "## Verdict on the paper's claim",
            "",
            "Claim (paper Section 6): at an equal feature budget, Shrinking Gradient reaches a "
            "lower loss than Doubly SGD and Fixed-Random. Measured: paired difference of test "
            "loss, SG − other (negative = SG better), mean ± 95% CI over repetitions.",
            "",
        ]
        xs = sorted(summary[xa].dropna().unique()) if xa else [None]
        verdict_rows = []
        for other in ("doubly_sgd", "fixed_random"):
            if other not in methods:
                continue
            for k in ks:
                words, cells = [], []
                for x in xs:
                    keys = {"dsgd_k": k} | ({xa: x} if xa else {})
                    p = paired(runs, "shrinking_gradient", other, keys)
                    words.append(_verdict_word(p))
                    cells.append(f"{_fmt(p['mean'], p['ci'], 3)}")
                L_row = [f"SG < {LABELS[other]}", k] + cells + [_claim_summary(words)]
                verdict_rows.append(L_row)
        head = ["claim", "k"] + [f"{xa}={x}" if xa else "all" for x in xs] + ["verdict"]
        L += [_md_table(head, verdict_rows), ""]
    path = out_dir / "REPORT.md"
    path.write_text("\n".join(L) + "\n")
    return path
