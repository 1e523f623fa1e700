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
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .budget import derive
from .results import copy_atomic, t975, write_atomic

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
    "teacher": [
        "Target in the RKHS of the experiment's own feature map (the paper's construction, "
        "generalized): `y(x) = Σ_{j∈S} c_j k(x_j, x)` with `S` a uniformly random subset of "
        "`sparsity` training indices, `c_j ~ N(0, 1)` and `k` the closed-form kernel of the "
        "configured feature map (built from the training inputs, as the learners' map is).",
        "Inputs (`inputs`): `gaussian` `N(0, I_D)`; `clipped_gaussian` `max(N(0, I_D), 0)`; "
        "`sphere` `N(0, I_D)` rows scaled to unit norm, so `k(x, x) = 1` for the `relu` and "
        "`fourier` kernels. The ReLU features are nonetheless **not** bounded by 1 as the "
        "paper's analysis assumes: on the sphere `w·x ~ N(0, 1)`, so `ψ = √2 max(0, w·x)` "
        "exceeds 1 with probability ≈ 0.24 and is unbounded; only its second moment is 1.",
        "Label noise (`noise`): Gaussian, std = `noise` × RMS of the clean training target, "
        "added to every split before scaling (0 = noiseless, the default).",
        "Labels are brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the "
        "training set and applied to every split (validation and test labels may slightly "
        "exceed 1).",
        "Validation and test sets are fresh draws from the same distribution, labelled by the "
        "same target; all learners and all grid points of a repetition share them.",
    ],
    "file": [
        "Rows of the file are shuffled with the repetition's dataset seed and split into `T` "
        "training, `n_val` validation and `n_test` test rows (`rest`: all remaining rows), so "
        "every repetition is a different random split.",
        "With `standardize: true` each feature is centered and scaled by the mean and standard "
        "deviation of the training rows only; with `center: true` the training mean of the "
        "target is subtracted from every split (the learners have no bias term and start at "
        "`f = 0`).",
        "Labels are then brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the "
        "training rows and applied to every split (validation and test labels may exceed 1).",
        "The target is whatever the file holds: it need not lie in the RKHS of the feature map, "
        "so the oracle's loss is not zero and no method can reach zero.",
    ],
    "diabetes": [
        "Data: scikit-learn's bundled diabetes set (Efron et al. 2004): 442 patients, 10 raw "
        "baseline variables (age, sex, bmi, bp, s1–s6), target a quantitative measure of "
        "disease progression one year later; no download (`pip install 'ilnrun[real]'`).",
        "Rows are shuffled with the repetition's dataset seed and split into `T` training, "
        "`n_val` validation and `n_test` test rows (`rest`: all remaining rows), so every "
        "repetition is a different random split.",
        "With `standardize: true` each feature is centered and scaled by the mean and standard "
        "deviation of the training rows only; with `center: true` the training mean of the "
        "target is subtracted from every split (the learners have no bias term and start at "
        "`f = 0`, so the zero predictor is the training-mean predictor).",
        "Labels are then brought into `[-1, 1]` by one factor `1 / max_i |y_i|` computed on the "
        "training rows and applied to every split (validation and test labels may exceed 1).",
        "The target is not in any RKHS by construction: the oracle's test loss is the "
        "reference for what the feature map can reach, not zero.",
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


def pick(runs: pd.DataFrame, method: str, keys: dict, by: str | None) -> pd.DataFrame:
    """Rows of ``method`` matching ``keys`` for one hyperparameter setting: the one selected on
    validation loss (``by=None``), or the one with the lowest mean ``by`` over repetitions
    among settings that never diverged or timed out."""
    g = runs[runs["method"] == method]
    for k, v in keys.items():
        g = g[g[k] == v]
    if by is None:
        return g[g["selected"]]
    ok = g[~(g["diverged"] | g["timed_out"])]
    if ok.empty:
        return ok
    return ok[ok["setting"] == ok.groupby("setting")[by].mean().idxmin()]


def paired(
    runs: pd.DataFrame, a: str, b: str, keys: dict, metric: str = "test_loss", by: str | None = None
) -> dict:
    """Mean and 95% CI of ``metric(a) − metric(b)`` over repetitions (settings chosen by
    :func:`pick`), restricted to rows matching ``keys`` (paired: both saw the same data)."""
    la = pick(runs, a, keys, by).set_index("repetition")[metric]
    lb = pick(runs, b, keys, by).set_index("repetition")[metric]
    d = (la - lb).dropna()
    d = d[np.isfinite(d)]
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    ci = t975(n - 1) * float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    return {"n": n, "mean": mean, "ci": ci}


def verdict_word(p: dict) -> str:
    """``SG lower|higher (significant|not significant)`` for one paired comparison."""
    if p["n"] == 0 or math.isnan(p["mean"]):
        return "no data"
    sig = not math.isnan(p["ci"]) and abs(p["mean"]) > p["ci"]
    side = "SG lower" if p["mean"] < 0 else "SG higher"
    return f"{side} ({'significant' if sig else 'not significant'})"


def claim_verdict(words: list[str]) -> str:
    """Collapse per-setting words into ``holds`` / ``holds in direction`` / ``mixed`` /
    ``does not hold`` (SG significantly higher somewhere and significantly lower nowhere)."""
    n = len(words)
    lower = sum(w.startswith("SG lower") for w in words)
    sig_lower = sum(w == "SG lower (significant)" for w in words)
    sig_higher = sum(w == "SG higher (significant)" for w in words)
    if n and sig_lower == n:
        return "holds"
    if sig_higher == 0 and lower == n:
        return "holds in direction, not always significantly"
    if sig_higher > 0 and sig_lower == 0:
        return "does not hold"
    if sig_higher == 0 and sig_lower == 0:
        return "no significant difference"
    return "mixed"


# (metric, selection rule for pick(), description) of the claims checked
COMPARISONS = (
    ("test_loss", None, "test loss (settings selected on validation loss)"),
    ("online_loss", None, "online loss (same settings)"),
    ("online_loss", "online_loss", "online loss (each learner's best setting for online loss)"),
)


def _per_T(g: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Mean and 95% t-interval half-width over repetitions of ``metrics``, per T."""
    rows = []
    for T, h in g.groupby("T"):
        row = {"T": T}
        for metric in metrics:
            v = h[metric].dropna().to_numpy(float)
            n = len(v)
            row[f"{metric}_mean"] = float(v.mean()) if n else math.nan
            row[f"{metric}_ci95"] = (
                t975(n - 1) * float(v.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
            )
        rows.append(row)
    return pd.DataFrame(rows)


def regret_slopes(g: pd.DataFrame) -> tuple[float, float] | None:
    """Least-squares slopes of log(mean regret) against log(T): over all T, and over the three
    largest T (the asymptotic regime); None with fewer than three positive means."""
    ok = g[g["regret_mean"] > 0].sort_values("T")
    if len(ok) < 3:
        return None
    x, y = np.log(ok["T"].to_numpy(float)), np.log(ok["regret_mean"].to_numpy(float))
    return float(np.polyfit(x, y, 1)[0]), float(np.polyfit(x[-3:], y[-3:], 1)[0])


class Report:
    """Everything a report section needs, read once from a results directory."""

    def __init__(self, results_dir: Path, out_dir: Path) -> None:
        self.results_dir, self.out_dir = Path(results_dir), Path(out_dir)
        self.cfg = yaml.safe_load((self.results_dir / "config.yaml").read_text())
        self.meta = json.loads((self.results_dir / "meta.json").read_text())
        self.runs = pd.read_csv(self.results_dir / "runs.csv")
        self.summary = pd.read_csv(self.results_dir / "summary.csv")
        self.xa = x_axis(self.cfg)
        self.ks = [int(k) for k in sorted(self.summary["dsgd_k"].dropna().unique())]
        self.methods = [m for m in LABELS if m in set(self.summary["method"])]
        self.xs = sorted(self.summary[self.xa].dropna().unique()) if self.xa else [None]

    def keys(self, k: int | None, x) -> dict:
        """Row filter for one budget and one x-axis value."""
        out = {} if k is None else {"dsgd_k": k}
        return out | ({self.xa: x} if self.xa and x is not None else {})

    def cell(self, method: str, metric: str, k: int | None, x) -> str:
        s = self.summary[self.summary["method"] == method]
        if method in BUDGETED and k is not None:
            s = s[s["dsgd_k"] == k]
        if self.xa and x is not None:
            s = s[s[self.xa] == x]
        if not len(s):
            return "—"
        return _fmt(s[f"{metric}_mean"].iloc[0], s[f"{metric}_ci95"].iloc[0])

    # --- sections ------------------------------------------------------------------------------

    def header(self) -> list[str]:
        name, meta = self.cfg["name"], self.meta
        cfg_path = meta.get("config_path") or f"configs/{name}.yaml"
        L = [
            f"# {name}: report",
            "",
            f"_Generated by `ilnrun report` from `{self.results_dir}` — do not edit by hand. "
            f"Results of git commit `{(meta.get('git_commit') or 'unknown')[:12]}`, run "
            f"{meta.get('start')} → {meta.get('end')} with {meta.get('jobs')} worker(s)._",
            "",
            "Regenerate:",
            "",
            "```",
            f"ilnrun run {cfg_path} --jobs 2",
            f"ilnrun plot {self.results_dir}",
            f"ilnrun report {self.results_dir} --out {self.out_dir}",
            "```",
            "",
        ]
        if self.cfg.get("description"):
            L += [self.cfg["description"].strip(), ""]
        return L

    def verdict_rows(
        self, metric: str, by: str | None = None
    ) -> list[tuple[str, int | None, list[dict], str]]:
        """(other learner, budget, paired results per x value, verdict) for the claim
        'SG has a lower ``metric`` than other' (settings chosen as in :func:`pick`)."""
        out = []
        for other in ("doubly_sgd", "fixed_random"):
            if other not in self.methods or "shrinking_gradient" not in self.methods:
                continue
            for k in self.ks or [None]:
                ps = [
                    paired(self.runs, "shrinking_gradient", other, self.keys(k, x), metric, by)
                    for x in self.xs
                ]
                out.append((other, k, ps, claim_verdict([verdict_word(p) for p in ps])))
        return out

    def headline(self) -> list[str]:
        L = ["## Headline", ""]
        for metric, by, what in COMPARISONS:
            rows = self.verdict_rows(metric, by)
            for other in ("doubly_sgd", "fixed_random"):
                by_verdict: dict[str, list] = {}
                for o, k, _, v in rows:
                    if o == other:
                        by_verdict.setdefault(v, []).append(k)
                if by_verdict:
                    parts = "; ".join(
                        f"**{v}** at k = {', '.join(str(k) for k in ks)}"
                        for v, ks in by_verdict.items()
                    )
                    L.append(f"- SG reaches a lower {what} than {LABELS[other]}: {parts}.")
        if self.xa == "T" and "regret" in self.runs and self.runs["regret"].notna().any():
            for m, setting, g in self.regret_groups():
                if m == "shrinking_gradient":
                    L.append(f"- Shrinking Gradient ({setting}): {self.slope_sentence(g)}")
        if "lemma5_max_ratio" in self.runs and self.runs["lemma5_max_ratio"].notna().any():
            r = self.runs["lemma5_max_ratio"].dropna()
            L.append(
                f"- Lemma 5's bound on |α|₁ {'never failed' if (r <= 1).all() else 'failed'} "
                f"({len(r)} passes checked after every round; largest |α|₁/bound = {r.max():.3g})."
            )
        L.append("")
        return L

    def setup(self) -> list[str]:
        cfg = self.cfg
        ds, b, ev = cfg["dataset"], cfg["budget"], cfg["evaluation"]
        T_values = ds["T"] if isinstance(ds["T"], list) else [ds["T"]]
        L = [
            "## Setup",
            "",
            f"- Dataset `{ds['kind']}`: "
            + ", ".join(f"{k} = {v}" for k, v in ds.items() if k != "kind")
            + f"; {cfg['repetitions']} repetitions, root seed {cfg['seed']}.",
            "- Feature map: "
            + ", ".join(f"{k} = {v}" for k, v in cfg["feature_map"].items())
            + ".",
            f"- Budget convention `{b['match']}`; Doubly SGD's `k` ∈ {self.ks}. Derived sizes:",
            "",
        ]
        rows = []
        for T in T_values:
            for k in self.ks:
                d = derive(b["match"], k, int(T))
                rows.append([T, k, f"{d.target:,}", d.m, d.k, d.r])
        L += [
            _md_table(["T", "k", f"target ({b['match']})", "m (SG)", "k (DSGD)", "r (FR)"], rows),
            "",
            "- Grids (every point is run for every setting and repetition):",
        ]
        for m, params in cfg["methods"].items():
            L.append(f"  - {LABELS[m]}: " + ", ".join(f"{k} = {v}" for k, v in params.items()))
        L += [
            f"- Evaluation: `test_loss_estimated` uses `m_test` = {ev['m_test']} Algorithm-2 "
            f"samples per point on {ev.get('n_test_estimated', 'all')} test points.",
            "",
            "## Choices where the paper is silent",
            "",
        ]
        L += [f"- {c}" for c in DATASET_CHOICES.get(ds["kind"], [])]
        L.append(f"- {FEATURE_CHOICES.get(cfg['feature_map']['kind'], '')}")
        L += [f"- {c}" for c in PROTOCOL_CHOICES]
        return L + [""]

    def counters(self) -> list[str]:
        runs = self.runs
        done = runs[~runs["diverged"] & ~runs["timed_out"]]
        rows = []
        bud = done[done["method"].isin(BUDGETED)]
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
        head = ["learner", "k", "target", "train_evals", "max deviation", "features_sampled"]
        L = [
            "## Budgets as counted by the learners",
            "",
            "Counted inside each learner's loop, over every cell that completed its pass.",
            "",
            _md_table(head + ["shrinks (sum)"], rows),
            "",
        ]
        div = runs.groupby("method")["diverged"].sum().astype(int)
        late = runs.groupby("method")["timed_out"].sum().astype(int)
        L.append(
            "Cells that diverged (stopped, skipped by selection) per learner, over all grid "
            "points: "
            + ", ".join(f"{LABELS[m]} {div.get(m, 0)}" for m in self.methods)
            + (
                "; timed out: " + ", ".join(f"{LABELS[m]} {late.get(m, 0)}" for m in self.methods)
                if late.sum()
                else ""
            )
            + "."
        )
        return L + [""]

    def figures(self) -> list[str]:
        names = []
        for stem in ("figure1", "budget_sweep", "regret", "curves"):
            src = self.results_dir / f"{stem}.png"
            if src.exists():
                if src.resolve() != (self.out_dir / src.name).resolve():
                    copy_atomic(src, self.out_dir / src.name)
                names.append(src.name)
        if not names:
            return []
        return ["## Figures", ""] + [f"![{n}]({n})" for n in names] + [""]

    def metric_tables(self) -> list[str]:
        """One table per budget with a row per x value; with no x axis, one table with a row per
        budget."""
        head = [LABELS[m] for m in self.methods]
        L = []
        for metric, title in (("test_loss", "Test loss"), ("online_loss", "Online loss")):
            L += [f"## {title} (mean ± 95% CI over repetitions, selected settings)", ""]
            if self.xa is None:
                rows = [
                    [k if k is not None else "—"]
                    + [self.cell(m, metric, k, None) for m in self.methods]
                    for k in self.ks or [None]
                ]
                L += [_md_table(["k"] + head, rows), ""]
                continue
            for k in self.ks or [None]:
                rows = [[x] + [self.cell(m, metric, k, x) for m in self.methods] for x in self.xs]
                if k is not None:
                    L += [f"Budget k = {k}:", ""]
                L += [_md_table([self.xa] + head, rows), ""]
        return L

    def sg_predictors(self) -> list[str]:
        if "shrinking_gradient" not in self.methods:
            return []
        L = [
            "## Shrinking Gradient's predictors (test loss, mean ± 95% CI)",
            "",
            "Final predictor evaluated exactly; the averaged predictor of Corollary 1; the final "
            "predictor evaluated with Algorithm-2 estimates (what a user without the kernel "
            "gets); the zero predictor for scale.",
            "",
        ]
        cols = [
            ("test_loss", "final, exact"),
            ("test_loss_avg", "averaged, exact"),
            ("test_loss_estimated", "final, Algorithm-2 estimates"),
            ("test_loss_zero", "zero predictor"),
        ]
        rows = []
        for k in self.ks or [None]:
            for x in self.xs:
                rows.append(
                    [k if k is not None else "—", x if x is not None else "all"]
                    + [self.cell("shrinking_gradient", m, k, x) for m, _ in cols]
                )
        L += [_md_table(["k", self.xa or "—"] + [c for _, c in cols], rows), ""]
        return L

    def theory(self) -> list[str]:
        """Theorem 1 (regret against the best f in the B-ball, its log-log slope in T) and
        Lemma 5 (the bound on |alpha|_1), when the run recorded them."""
        L: list[str] = []
        runs = self.runs
        if "lemma5_max_ratio" in runs and runs["lemma5_max_ratio"].notna().any():
            r = runs["lemma5_max_ratio"].dropna()
            L += [
                "## Lemma 5: |α^(t+1)|₁ ≤ (16B + 1) Σ_{s≤t} η_s",
                "",
                f"Checked after every round of every Shrinking Gradient pass ({len(r)} passes): "
                f"the largest ratio |α|₁ / bound was {r.max():.4g}; the bound "
                + (
                    "**never failed**."
                    if (r <= 1).all()
                    else f"**failed in {(r > 1).sum()} passes**."
                )
                + " (Lemma 5 assumes |y_t| ≤ 1, which the label scaling guarantees on the "
                "training split.)",
                "",
            ]
        if "regret" not in runs or not runs["regret"].notna().any() or self.xa != "T":
            return L
        L += [
            "## Theorem 1: regret against the best predictor in the B-ball",
            "",
            "Regret `R_T = Σ_t ½(f_t(x_t) − y_t)² − min_{‖f‖≤B} Σ_t ½(f(x_t) − y_t)²` with "
            "`f_t` evaluated exactly (the comparator by the exact kernel); "
            "`R_T (estimated)` uses Shrinking Gradient's own predictions `E_t` instead. "
            "Mean ± 95% CI over repetitions, for every Shrinking Gradient setting (the oracle: "
            "its setting selected on validation loss). The theorem bounds the expected "
            "regret by O(B√T), i.e. a log-log slope ≤ ½ asymptotically.",
            "",
        ]
        for m, setting, g in self.regret_groups():
            rows = [
                [
                    int(r["T"]),
                    _fmt(r["regret_mean"], r["regret_ci95"]),
                    _fmt(r["regret_estimated_mean"], r["regret_estimated_ci95"]),
                    _fmt(r["regret_mean"] / math.sqrt(r["T"]), None),
                    _fmt(r["best_loss_B_mean"], None),
                ]
                for _, r in g.iterrows()
            ]
            L += [
                f"{LABELS[m]} ({setting}):",
                "",
                _md_table(["T", "R_T", "R_T (estimated)", "R_T / √T", "best loss in ball"], rows),
                "",
                self.slope_sentence(g),
                "",
            ]
        L += [
            "Theorem 1 is an upper bound on the expected regret: a negative regret means the "
            "learner's iterates did better than every predictor in the ball (they are not "
            "confined to it), which the bound allows. A growing 'best loss in ball' means the "
            "target lies outside the ball of radius B.",
            "",
        ]
        return L

    def regret_groups(self) -> list[tuple[str, str, pd.DataFrame]]:
        """Per-T regret statistics (mean, 95% CI over repetitions): every grid setting of
        Shrinking Gradient, and the validation-selected setting of the other learners."""
        out = []
        runs = self.runs[self.runs["regret"].notna()]
        for m in self.methods:
            r = runs[runs["method"] == m]
            if m != "shrinking_gradient":
                r = r[r["selected"]]
            groups = (
                r.groupby("setting", sort=False)
                if m == "shrinking_gradient"
                else [("setting selected on validation loss per T", r)]
            )
            for setting, g in groups:
                if len(g):
                    out.append(
                        (m, setting, _per_T(g, ("regret", "regret_estimated", "best_loss_B")))
                    )
        return out

    @staticmethod
    def slope_sentence(g: pd.DataFrame) -> str:
        slopes = regret_slopes(g)
        dropped = [int(t) for t in g.loc[~(g["regret_mean"] > 0), "T"]]
        note = f" (T = {', '.join(map(str, dropped))} left out: mean regret ≤ 0)" if dropped else ""
        if slopes is None:
            return f"Too few positive mean regrets for a log-log slope{note}."
        return (
            f"Log-log slope of mean regret against T: **{slopes[0]:.3f}** over the T with "
            f"positive mean regret, **{slopes[1]:.3f}** over the three largest of them"
            f"{note}; Theorem 1's rate is ½."
        )

    def selected(self) -> list[str]:
        rows = []
        for m in self.methods:
            for k in self.ks if m in BUDGETED and self.ks else [None]:
                s = self.summary[self.summary["method"] == m]
                s = s[s["dsgd_k"] == k] if k is not None else s
                counts = s["setting"].value_counts()
                rows.append(
                    [
                        LABELS[m],
                        k if k is not None else "—",
                        "; ".join(f"{st} (×{c})" for st, c in counts.items()),
                    ]
                )
        return [
            "## Selected hyperparameters",
            "",
            _md_table(["learner", "k", "selected setting (× dataset settings)"], rows),
            "",
        ]

    def verdicts(self) -> list[str]:
        if "shrinking_gradient" not in self.methods:
            return []
        L = [
            "## Verdict on the paper's claim",
            "",
            "Claim (paper Section 6): at an equal feature budget, Shrinking Gradient reaches a "
            "lower loss than Doubly SGD and Fixed-Random. The paper does not say which loss, so "
            "three comparisons are made: the test loss of the learned predictor (evaluated "
            "exactly) with settings selected on validation loss; the online loss of the single "
            "pass with the same settings; and the online loss with each learner's best setting "
            "for online loss (the regret view: best step size in hindsight). Cells: paired "
            "difference SG − other (negative = SG better), mean ± 95% CI over repetitions.",
            "",
        ]
        head = ["claim", "k"] + [f"{self.xa}={x}" if self.xa else "all" for x in self.xs]
        for metric, by, what in COMPARISONS:
            rows = [
                [f"SG < {LABELS[o]}", k if k is not None else "—"]
                + [_fmt(p["mean"], p["ci"], 3) for p in ps]
                + [v]
                for o, k, ps, v in self.verdict_rows(metric, by)
            ]
            L += [f"**{what[0].upper() + what[1:]}**:", ""]
            L += [_md_table(head + ["verdict"], rows), ""]
        return L


def build_report(results_dir: Path, out_dir: Path) -> Path:
    """Write ``out_dir/REPORT.md`` (and copy the figures next to it); return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    r = Report(results_dir, out_dir)
    sections = (
        r.header,
        r.headline,
        r.setup,
        r.counters,
        r.figures,
        r.metric_tables,
        r.sg_predictors,
        r.theory,
        r.selected,
        r.verdicts,
    )
    lines = [line for section in sections for line in section()]
    path = out_dir / "REPORT.md"
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def build_index(experiments_dir: Path) -> Path:
    """Write ``experiments_dir/README.md``: one entry per ``*/REPORT.md`` with its title, the
    commands that regenerate it and its headline (the ``## Headline`` section, else the first
    paragraph), all taken from the reports themselves."""
    experiments_dir = Path(experiments_dir)
    L = [
        "# Experiments",
        "",
        "_Generated by `ilnrun index experiments` from the reports below; each report is "
        "generated from its results by `ilnrun report`._",
        "",
    ]
    for report in sorted(experiments_dir.glob("**/REPORT.md")):
        lines = report.read_text().splitlines()
        title = lines[0].lstrip("# ").strip() if lines else report.parent.name
        L += [f"## [{title}]({report.relative_to(experiments_dir)})", ""]
        if "```" in lines:  # the first code block holds the commands
            a = lines.index("```")
            b = lines.index("```", a + 1)
            L += lines[a : b + 1] + [""]
        if "## Headline" in lines:
            a = lines.index("## Headline") + 1
            b = next((i for i in range(a, len(lines)) if lines[i].startswith("## ")), len(lines))
            L += [x for x in lines[a:b] if x.strip()] + [""]
        else:
            body = [x for x in lines[1:] if x.strip() and not x.startswith(("#", "_", "`"))]
            L += body[:1] + [""]
    path = experiments_dir / "README.md"
    path.write_text("\n".join(L) + "\n")
    return path
