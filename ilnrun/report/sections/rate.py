"""The rate comparison with Doubly SGD (ILN paper Section 4; docs/protocol.md §11), when the run
holds Doubly SGD's ``dai`` preset: for each target excess risk ``epsilon`` (the preset's
``epsilon`` values) the smallest ``T`` at which each learner reaches it, and the log-log slope of
``T`` against ``1/epsilon`` (the paper's bounds: 2 for Shrinking Gradient, 4 for Doubly SGD)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ...config import grid
from ...datasets import DATASETS, build_dataset
from ...features import build_feature_map
from ...learners import LEARNERS as LEARNERS_BY_NAME
from ...rate import b_slope_over_repetitions, first_reach, rate_slope, slope_over_repetitions
from ...theory import best_in_ball_loss_primal
from ..data import ONE_REPETITION, ReportData, md_table

# (key, short label, description, the paper's bound on the slope of T against 1/epsilon)
LEARNERS = (
    ("sg_avg", "SG avg", "Shrinking Gradient, theory preset, averaged predictor (Corollary 1)", 2),
    (
        "sg_final",
        "SG final",
        "Shrinking Gradient, theory preset, final predictor (not covered by the paper's bound: "
        "Corollary 1 bounds the averaged predictor only)",
        None,
    ),
    (
        "dsgd_dai",
        "DSGD Dai",
        "Doubly SGD, the paper's reading of Dai et al.: nu = epsilon/B², "
        "gamma_t = theta/(t + theta/cap), theta nu = theta_nu, cap selected on validation "
        "per T (one setting per target epsilon)",
        4,
    ),
    (
        "dsgd_dai_literal",
        "DSGD Dai literal",
        "the same with Dai's gamma_t = theta/t exactly (no cap)",
        4,
    ),
    (
        "dsgd_val",
        "DSGD val",
        "Doubly SGD, eta and schedule selected on validation per T as in figure1 (nu = 0)",
        None,
    ),
)
PER_TARGET = ("dsgd_dai", "dsgd_dai_literal")
# rows whose "paper's bound" column names why there is none
NO_BOUND = {"sg_final": "none (the bound is on the average)", "dsgd_val": "—"}
# the headline's outcome: Corollary 1's predictor against each Doubly SGD row (not the
# literal steps, which diverge)
# Corollary 1's averaged predictor against Shrinking Gradient's own final iterate (which the bound
# does not cover, and which may need fewer examples) and against each Doubly SGD row
OUTCOME = ("sg_avg", ("sg_final", "dsgd_dai", "dsgd_val"))

Curves = dict[float, dict[object, tuple[list[float], list[float]]]]
# a best-in-ball test loss below this fraction of the zero predictor's is rounding (its digits
# depend on the CPU's BLAS kernel)
ROUNDING = 1e-12


def _has_choice(spec, name: str, value: str) -> bool:
    return any(p.name == name and value in (p.choices or ()) for p in spec.params)


def roles() -> tuple[str | None, str | None]:
    """``(proposed, dai)``: the proposed learner with a ``theory`` preset (Shrinking Gradient)
    and the learner with a ``dai`` preset (Doubly SGD), read from the specs."""
    proposed = next(
        (
            n
            for n, s in LEARNERS_BY_NAME.items()
            if s.role == "proposed" and _has_choice(s, "preset", "theory")
        ),
        None,
    )
    dai = next((n for n, s in LEARNERS_BY_NAME.items() if _has_choice(s, "preset", "dai")), None)
    return proposed, dai


def comparator_ok(cfg: dict) -> str | None:
    """``None`` when the best predictor in the ball is the target itself and its test loss is 0
    (a dataset that scales its target to ``rkhs_norm``, at most the largest ``B`` of each
    learner, with noise-free test labels: noise-free data or a dataset whose label noise
    reaches the training and validation labels only, ``DatasetSpec.clean_test``), else why
    not. With several ``B`` per learner the section reads the cells whose ``B`` is the task's
    ``rkhs_norm`` (:func:`matched_B`)."""
    ds = cfg["dataset"]
    spec = DATASETS[ds["kind"]]
    declared = {p.name for p in spec.params}
    noisy = any(v for v in grid.as_list(ds.get("noise") or 0.0))
    if (
        "rkhs_norm" not in declared
        or ds.get("rkhs_norm") is None
        or (noisy and not spec.clean_test)
    ):
        return "the excess risk needs noise-free data whose target is scaled to rkhs_norm"
    norms = ds["rkhs_norm"] if isinstance(ds["rkhs_norm"], list) else [ds["rkhs_norm"]]
    radii = []
    for method in roles():
        b = cfg["methods"].get(method, {}).get("B", 1.0)
        radii.append(max(b) if isinstance(b, list) else b)
    if max(norms) > min(radii):
        return f"the target's RKHS norm {max(norms)} exceeds B = {min(radii)}"
    return None


def matched_B(g: pd.DataFrame) -> pd.DataFrame:
    """The rows of one task (one ``rkhs_norm``) that the rate section reads: for a learner run
    with several ``B``, the rows whose ``B`` equals the task's ``rkhs_norm`` (the ball is the
    target's own: a B sweep); rows without a ``B`` (a grid setting) and learners with one
    ``B`` are kept as they are."""
    if "B" not in g or "rkhs_norm" not in g or g["rkhs_norm"].isna().all():
        return g
    keep = pd.Series(True, index=g.index)
    for _, h in g.groupby("method"):
        if h["B"].nunique() > 1:
            keep[h.index] = h["B"].isna() | np.isclose(h["B"], h["rkhs_norm"])
    return g[keep]


def comparator_lines(cfg: dict, runs: pd.DataFrame) -> list[str]:
    """A check of the comparator on repetition 0 at the smallest T of every dataset setting
    group: the instance is rebuilt from its seed (its zero-predictor loss must equal the row's
    ``test_loss_zero``) and the best predictor in the ball is fitted on its test split by the
    primal constrained least squares (:func:`ilnrun.theory.best_in_ball_loss_primal`)."""
    fm = build_feature_map(cfg["feature_map"], np.zeros((1, 1)))
    if fm.primal(np.zeros((1, 1))) is None:
        return []
    radii = [b for m in roles() for b in grid.as_list(cfg["methods"].get(m, {}).get("B", 1.0))]
    sweep = _B_sweep(cfg)
    smallest: dict[str, dict] = {}
    for data in grid.dataset_settings(cfg):
        rest = json.dumps({k: v for k, v in data.items() if k != "T"}, sort_keys=True)
        if rest not in smallest or data["T"] < smallest[rest]["T"]:
            smallest[rest] = data
    rows = []
    for data in smallest.values():
        data_id = grid.data_identity(cfg, data)
        key = {"data": data if data_id is None else data_id, "rep": 0}
        d = build_dataset(data, np.random.default_rng(grid.seed_sequence(cfg["seed"], key)))
        fmap = build_feature_map(cfg["feature_map"], d.X_train)
        Phi, c = fmap.primal(d.X_test)
        # in a B sweep the ball is the task's own (matched_B), else the smallest B of the run
        B = data["rkhs_norm"] if sweep and data["rkhs_norm"] in radii else min(radii)
        best = best_in_ball_loss_primal(Phi, c, d.y_test, B) / len(d.y_test)
        match = runs[(runs["repetition"] == 0) & (runs["T"] == data["T"])]
        for k, v in data.items():
            if k in match and not isinstance(v, (list, dict)):
                match = match[match[k] == v]
        zero = 0.5 * float(np.mean(d.y_test**2))
        same = len(match) and np.isclose(match["test_loss_zero"].iloc[0], zero, rtol=1e-12)
        shown = ("target_seed", "D", "T", "rkhs_norm") if sweep else ("target_seed", "D", "T")
        label = ", ".join(f"{k} = {v}" for k, v in data.items() if k in shown)
        # a loss at rounding level is written as such: its last digits are the BLAS kernel's,
        # which differ between CPUs (docs/protocol.md §9.1), and the report must not
        shown_best = f"{best:.2g}" if best > ROUNDING * zero else f"0 to rounding (< {ROUNDING:g})"
        rows.append([label, f"{zero:.4g}", "yes" if same else "NO", shown_best])
    return [
        "Check of the comparator (repetition 0 at the smallest T of every setting, the instance "
        "rebuilt from its seed): the best predictor in the ball fitted on the test split by the "
        "primal constrained least squares has the test loss below (0 to rounding: the target "
        "lies in the ball and fits the labels exactly; a loss below "
        f"{ROUNDING:g} of the zero predictor's is written as 0 to rounding).",
        "",
        md_table(
            ["instance", "zero-predictor test loss", "equals runs.csv", "best-in-ball test loss"],
            rows,
        ),
        "",
    ]


def _selected(g: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group of ``by`` (and T): the rows of the setting with the lowest mean validation loss
    over repetitions among the settings none of whose repetitions diverged (figure1's rule)."""
    out = []
    for _, h in g.groupby([*by, "T"], dropna=False):
        bad = h.groupby("setting")["diverged"].any()
        ok = h[h["setting"].isin(bad.index[~bad])]
        if ok.empty:
            out.append(h.assign(test_loss=math.inf, test_loss_avg=math.inf))
            continue
        best = ok.groupby("setting")["val_loss"].mean().idxmin()
        out.append(ok[ok["setting"] == best])
    return pd.concat(out) if out else g.iloc[:0]


def _by_rep(rows: pd.DataFrame, metric: str) -> dict[object, tuple[list[float], list[float]]]:
    """``{rep: (Ts, excess risks)}``: the comparator's loss is 0 (the noise-free target)."""
    out = {}
    for rep, h in rows.sort_values("T").groupby("repetition"):
        v = h[metric].astype(float).where(~h["diverged"].astype(bool), math.inf)
        out[rep] = (h["T"].astype(float).tolist(), v.tolist())
    return out


def learner_curves(g: pd.DataFrame, targets: list[float]) -> dict[str, Curves]:
    """Excess-risk curves of every learner of one task, per target and repetition."""
    proposed, dai_name = roles()
    g = matched_B(g)
    sg = g[g["method"] == proposed]
    ds = g[g["method"] == dai_name]
    dai = ds[ds["preset"] == "dai"]
    out: dict[str, Curves] = {}
    if not sg.empty:
        out["sg_avg"] = {t: _by_rep(sg, "test_loss_avg") for t in targets}
        out["sg_final"] = {t: _by_rep(sg, "test_loss") for t in targets}
    capped = _selected(dai[dai["cap"].notna()], ["epsilon"])
    literal = dai[dai["cap"].isna()]
    for key, rows in (("dsgd_dai", capped), ("dsgd_dai_literal", literal)):
        if not rows.empty:
            out[key] = {
                t: _by_rep(rows[np.isclose(rows["epsilon"], t)], "test_loss") for t in targets
            }
    grid = ds[ds["preset"] != "dai"]
    if not grid.empty:
        sel = _selected(grid, [])
        out["dsgd_val"] = {t: _by_rep(sel, "test_loss") for t in targets}
    return out


def mean_curve(by_rep: dict) -> tuple[list[float], list[float]]:
    """The mean excess risk over repetitions at every T (infinite when any repetition
    diverged)."""
    Ts = sorted({T for ts, _ in by_rep.values() for T in ts})
    vals = {T: [] for T in Ts}
    for ts, es in by_rep.values():
        for T, e in zip(ts, es, strict=True):
            vals[T].append(e)
    return Ts, [float(np.mean(vals[T])) for T in Ts]


def _fmt_T(T: float, censored: bool, Tmax: float) -> str:
    if math.isnan(T):
        return f"> {int(Tmax):,}"
    return f"≤ {int(T):,}" if censored else f"{T:,.0f}"


def render_task(
    g: pd.DataFrame, targets: list[float], title: str, tested: bool = True
) -> tuple[list[str], dict]:
    """The tables of one task (excess risk by T, T(epsilon), slopes) and a summary for the
    section's overview: per learner its slope statistics and T(epsilon) of the mean curve
    (``tested``: two repetitions or more, else no interval is named)."""
    summary: dict = {}
    curves = learner_curves(g, targets)
    present = [row for row in LEARNERS if row[0] in curves]
    Ts = sorted(g["T"].unique())
    L = [f"### {title}", ""]
    head, cols = ["T"], []
    for k, short, _, _ in present:
        if k == "dsgd_dai_literal":
            continue  # (stated in words below)
        for t in targets if k in PER_TARGET else targets[:1]:
            head.append(short + (f" ε={t:g}" if k in PER_TARGET else ""))
            cols.append(mean_curve(curves[k][t]))
    rows = [[f"{int(T):,}"] + [_fmt_e(c[1][i]) for c in cols] for i, T in enumerate(Ts)]
    L += [
        "Excess risk (test loss − the best-in-ball predictor's test loss, which is 0), mean over "
        "repetitions:",
        "",
        md_table(head, rows),
        "",
    ]
    if "dsgd_dai_literal" in curves:
        lit = g[(g["method"] == roles()[1]) & (g["preset"] == "dai") & g["cap"].isna()]
        div = lit[lit["diverged"].astype(bool)]
        L += [
            f"DSGD Dai literal diverged in {len(div)} of {len(lit)} cells"
            + (
                f", at round {int(div['rounds'].min())}–{int(div['rounds'].max())} "
                f"(median {int(div['rounds'].median())})"
                if len(div) and "rounds" in div
                else ""
            )
            + ".",
            "",
        ]
    rows = []
    for t in targets:
        row = [f"{t:g}"]
        for k, _, _, _ in present:
            T, cens = first_reach(*mean_curve(curves[k][t]), t)
            reached = sum(
                not math.isnan(first_reach(ts, es, t)[0]) for ts, es in curves[k][t].values()
            )
            row.append(f"{_fmt_T(T, cens, Ts[-1])} ({reached}/{len(curves[k][t])})")
        rows.append(row)
    L += [
        "Smallest T reaching each target epsilon: on the mean curve, log-log interpolated "
        "between grid points (`≤ T` when the first grid T already reaches it, `> T` when no "
        "grid T does); in brackets the repetitions whose own curve reaches it on the grid:",
        "",
        md_table(["epsilon"] + [short for _, short, _, _ in present], rows),
        "",
    ]
    rows = []
    for k, short, _, bound in present:
        pts = [(t, *first_reach(*mean_curve(curves[k][t]), t)) for t in targets]
        use = [(t, T) for t, T, c in pts if math.isfinite(T) and not c]
        s_mean = rate_slope([t for t, _ in use], [T for _, T in use])
        st = slope_over_repetitions(curves[k])
        summary[k] = {"slope": st, "reach": {t: T for t, T, _ in pts}, "censored": pts}
        ci = (
            f"{st['mean']:.2f} [{st['mean'] - st['ci95']:.2f}, {st['mean'] + st['ci95']:.2f}]"
            if st["n"] > 1
            else "—"
        )
        rows.append(
            [
                short,
                "—" if math.isnan(s_mean) else f"{s_mean:.2f} ({len(use)} targets)",
                ci,
                f"{st['n']}" + (f" ({st['dropped']} without a slope)" if st["dropped"] else ""),
                NO_BOUND.get(k, "—") if bound is None else str(bound),
            ]
        )
    per_rep = "with the 95% Student-t interval of their mean:" if tested else f"({ONE_REPETITION})"
    L += [
        "Log-log slope of T(epsilon) against 1/epsilon: on the mean curve (over the targets it "
        "reaches inside the grid, neither `≤` nor `>`), and per repetition (each repetition's "
        f"own curve, over the targets it reaches inside the grid) {per_rep}",
        "",
        md_table(
            [
                "learner",
                "slope (mean curve)",
                "slope per repetition" + (": mean [95% CI]" if tested else ""),
                "repetitions",
                "paper's bound",
            ],
            rows,
        ),
        "",
    ]
    return L, summary


def _fmt_e(v: float) -> str:
    return "diverged" if not math.isfinite(v) else f"{v:.3g}"


def _targets_tasks(r: ReportData, dai: pd.DataFrame) -> tuple[list[float], list[str]]:
    """The target epsilons (largest first) and the dataset axes other than T (one task per
    combination of their values)."""
    targets = sorted({float(e) for e in dai["epsilon"].dropna()}, reverse=True)
    tasks = [
        k for k, v in r.cfg["dataset"].items() if isinstance(v, list) and k not in ("T", "kind")
    ]
    return targets, tasks


def task_targets(cfg: dict, g: pd.DataFrame, targets: list[float]) -> list[float]:
    """The targets of one task. With noisy labels (the exponents' setting, :func:`exponents`:
    the test labels are clean, so the mean predictor's test loss is its excess risk) only the
    targets below the task's mean predictor's test loss (``test_loss_const``, mean over the
    task's cells): a larger one is reached by predicting the training mean, and would enter a
    slope of T against 1/epsilon as a free point. Noise-free: every target (:func:`flags` says
    which lie above the mean predictor's loss)."""
    if not _noise(cfg) or "test_loss_const" not in g or g["test_loss_const"].isna().all():
        return targets
    const = float(g["test_loss_const"].mean())
    return [t for t in targets if t < const]


def _groups(runs: pd.DataFrame, tasks: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """The tasks (one per combination of the dataset axes other than T), titled."""
    groups = runs.groupby(tasks, dropna=False) if tasks else [((), runs)]
    out = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        title = ", ".join(f"{a} = {b}" for a, b in zip(tasks, key, strict=True)) or "all data"
        out.append((title, g))
    return out


def headline_lines(r: ReportData) -> list[str]:
    """The headline bullets: the outcome (which learner needs more examples at each epsilon, by
    how much: :func:`outcome_text`), each learner's slope of T against 1/epsilon over the
    tasks, and the flags of :func:`flags` (a constant-step Doubly SGD schedule, targets above
    the mean predictor's loss)."""
    runs = r.runs
    if "preset" not in runs or "epsilon" not in runs:
        return []
    dai = runs[(runs["method"] == roles()[1]) & (runs["preset"] == "dai")]
    if dai.empty or comparator_ok(r.cfg):
        return []
    targets, tasks = _targets_tasks(r, dai)
    sums = [render_task(g, task_targets(r.cfg, g, targets), "")[1] for _, g in _groups(runs, tasks)]
    parts = []
    for k, short, _, bound in LEARNERS:
        sts = [s[k]["slope"] for s in sums if k in s and s[k]["slope"]["n"] > 1]
        note = " (not covered by the bound)" if k in NO_BOUND and bound is None else ""
        note = "" if k == "dsgd_val" else note
        if sts:
            lo = min(st["mean"] - st["ci95"] for st in sts)
            hi = max(st["mean"] + st["ci95"] for st in sts)
            parts.append(
                f"{short}{note} {_range([st['mean'] for st in sts], '.2f')} "
                f"(95% intervals {lo:.2f}–{hi:.2f})"
            )
        elif any(k in s for s in sums):
            parts.append(f"{short} none (no target reached)")
    L = [
        f"- The rate claim against Doubly SGD, {r.run_protocol} (ILN paper Section 4; bounds: "
        "O(B²/ε²) examples for Shrinking Gradient's averaged predictor, O(B⁴/ε⁴) for Doubly "
        f"SGD): {outcome_text(sums, targets)} Slope of T against 1/epsilon for epsilon = "
        f"{targets[-1]:g}–{targets[0]:g}, per-repetition mean over {len(sums)} setting(s): "
        + "; ".join(parts)
        + "."
    ]
    L += [
        f"- The rate claim against Doubly SGD, {r.run_protocol}: {f}"
        for f in flags(r, dai, targets)
    ]
    ex = exponents(r, targets)
    if ex is not None:
        L.append(f"- The rate claim against Doubly SGD, {r.run_protocol}: {exponent_words(ex)}")
    return L


def outcome_text(summaries: list[dict], targets: list[float]) -> str:
    """Which learner needs more examples: for Corollary 1's averaged predictor (SG avg) against
    Shrinking Gradient's final iterate and each Doubly SGD row, the ratio ``T_SG(ε) / T_b(ε)``
    of the mean curves' first reaches over every setting and target both reach inside the grid
    (neither ``≤`` nor ``>``):
    ``SG avg needs 2.2–2.4× more examples than DSGD Dai at 4 of 4 (setting, ε) (2,972 against
    1,348 at ε = 0.0005)``."""
    a, others = OUTCOME
    shorts = {k: short for k, short, _, _ in LEARNERS}
    out = []
    for b in others:
        pairs = []  # (ratio, epsilon, T_a, T_b)
        missing = 0
        for s in summaries:
            if a not in s or b not in s:
                continue
            for (t, Ta, ca), (_, Tb, cb) in zip(s[a]["censored"], s[b]["censored"], strict=True):
                if math.isfinite(Ta) and math.isfinite(Tb) and not ca and not cb:
                    pairs.append((Ta / Tb, t, Ta, Tb))
                else:
                    missing += 1
        if not pairs and not missing:
            continue
        n = len(pairs) + missing
        if not pairs:
            out.append(
                f"{shorts[a]} against {shorts[b]}: no (setting, ε) reached by both inside the "
                f"grid ({n} not comparable: reached already at the smallest T, or not by "
                "the largest)"
            )
            continue
        more = [x for x in pairs if x[0] > 1]
        fewer = [x for x in pairs if x[0] < 1]
        smallest = min(pairs, key=lambda x: (x[1], -x[0]))
        example = f"{smallest[2]:,.0f} against {smallest[3]:,.0f} at ε = {smallest[1]:g}"
        words = []
        if more:
            words.append(
                f"needs {_range([x[0] for x in more], '.2g')}× **more** examples than "
                f"{shorts[b]} at {len(more)} of {n} (setting, ε)"
            )
        if fewer:
            words.append(
                f"{_range([1 / x[0] for x in fewer], '.2g')}× **fewer** at {len(fewer)} of {n}"
            )
        if missing:
            words.append(
                f"not comparable at {missing} (reached already at the smallest T, or not by "
                "the largest)"
            )
        out.append(f"{shorts[a]} {', '.join(words)} ({example})")
    return ("; ".join(out) + ".") if out else ""


def flags(r: ReportData, dai: pd.DataFrame, targets: list[float]) -> list[str]:
    """What limits the rate comparison, as sentences: Doubly SGD's capped schedule
    ``γ_t = θ/(t + θ/cap)`` is constant over the whole measured range when ``θ/cap`` exceeds
    the largest T (``γ_t ≥ cap/2`` up to ``t = θ/cap``), so it is not Dai et al.'s ``θ/t``
    (``θ = theta_nu B²/ε``); and a target ``ε`` at or above the mean predictor's test loss is
    reached by predicting the training mean."""
    L = []
    runs = r.runs
    Tmax = float(runs["T"].max())
    capped = _selected(dai[dai["cap"].notna()], ["epsilon"]) if dai["cap"].notna().any() else None
    if capped is not None and {"theta_nu", "B"} <= set(capped):
        theta = capped["theta_nu"].astype(float) * capped["B"].astype(float) ** 2
        knee = theta / capped["epsilon"].astype(float) / capped["cap"].astype(float)
        knee = knee[capped["cap"].astype(float) > 0]
        if len(knee) and (knee > Tmax).all():
            L.append(
                "DSGD Dai's selected schedule is **constant-step over the whole measured range**: "
                f"θ/cap = {_range(knee.tolist(), ',.0f')} > the largest T = {int(Tmax):,} "
                "(γ_t = θ/(t + θ/cap) stays within a factor 2 of cap up to t = θ/cap), so it "
                "never reaches Dai et al.'s θ/t regime on these T."
            )
    if "test_loss_const" in runs and runs["test_loss_const"].notna().any() and _noise(r.cfg):
        for title, g in _groups(runs, _targets_tasks(r, dai)[1]):
            out = [t for t in targets if t not in task_targets(r.cfg, g, targets)]
            if out:
                L.append(
                    f"At {title}, ε = {', '.join(f'{t:g}' for t in out)} lie at or above the "
                    f"mean predictor's test loss ({float(g['test_loss_const'].mean()):.2g}, its "
                    "excess risk: reaching them needs no more than predicting the training "
                    "mean) and are left out of that task's tables and slopes."
                )
    elif "test_loss_const" in runs and runs["test_loss_const"].notna().any():
        const = float(runs["test_loss_const"].mean())
        above = [t for t in targets if t >= const]
        if above:
            which = "Every target" if len(above) == len(targets) else f"{len(above)} targets"
            L.append(
                f"{which} (ε = {', '.join(f'{t:g}' for t in above)}) lies at or **above the "
                f"mean predictor's test loss** ({const:.2g}, mean over the cells): reaching it "
                "needs no more than predicting the training mean."
            )
    return L


def render(r: ReportData) -> list[str]:
    runs = r.runs
    if "preset" not in runs or "epsilon" not in runs:
        return []
    dai = runs[(runs["method"] == roles()[1]) & (runs["preset"] == "dai")]
    if dai.empty:
        return []
    L = ["## The rate claim against Doubly SGD (ILN paper Section 4)", ""]
    why = comparator_ok(r.cfg)
    if why:
        return L + [f"Not computed: {why}.", ""]
    targets, tasks = _targets_tasks(r, dai)
    labels = (
        "the labels are noise-free, so its loss is 0 on every split"
        if not _noise(r.cfg)
        else "the test labels are clean (the label noise, sigma = "
        + ", ".join(f"{v:g}" for v in _noise(r.cfg))
        + ", is on the training and validation labels only), so it is also the Bayes "
        "predictor, its test loss is 0"
    )
    L += [
        "The best predictor in the ball `‖f‖_H ≤ B` is the target itself: its RKHS norm is "
        f"`rkhs_norm ≤ B` and {labels} and a predictor's excess risk is its test loss"
        + (
            " (with several B per learner, the cells whose B is the task's rkhs_norm)"
            if _B_sweep(r.cfg)
            else ""
        )
        + ". Targets epsilon: the `epsilon` values of "
        "Doubly SGD's `dai` preset. Doubly SGD's selected settings (cap per epsilon, eta and "
        "schedule for the validation-selected rows) are chosen per T on the mean validation "
        "loss over repetitions among the settings with no diverged repetition.",
        "",
    ]
    run = [row for row in LEARNERS if row[0] != "dsgd_dai_literal" or dai["cap"].isna().any()]
    L += ["Learners:", ""] + [f"- **{short}**: {desc}." for _, short, desc, _ in run] + [""]
    L += sources(r.cfg) + comparator_lines(r.cfg, r.runs)
    body, summaries = [], []
    for title, g in _groups(runs, tasks):
        lines, summary = render_task(g, task_targets(r.cfg, g, targets), title, r.tested)
        body += lines
        summaries.append(summary)
    lit = dai[dai["cap"].isna()]
    const = runs["test_loss_const"] if "test_loss_const" in runs else pd.Series(dtype=float)
    L += overview(summaries, targets, lit)
    if text := outcome_text(summaries, targets):
        L.append(f"- Examples needed, Corollary 1's predictor against Doubly SGD: {text}")
    L += [f"- {f}" for f in flags(r, dai, targets)]
    if const.notna().any():
        L += [
            f"- Yardstick: the mean predictor (the training-label mean) has test loss "
            f"{const.min():.2g}–{const.max():.2g}, so excess risks above it are reached "
            f"before a learner beats predicting the mean.",
            "",
        ]
    ex = exponents(r, targets)
    if ex is not None:
        L += exponent_tables(ex)
    return L + body


def _range(values: list[float], fmt: str) -> str:
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return "—"
    lo, hi = min(v), max(v)
    return format(lo, fmt) if lo == hi else f"{format(lo, fmt)}–{format(hi, fmt)}"


def overview(summaries: list[dict], targets: list[float], literal: pd.DataFrame) -> list[str]:
    """What the data say, over every setting: each learner's slope against its bound, and the
    T each needs for the smallest target."""
    L = ["### What the data say", ""]
    for k, short, _, bound in LEARNERS:
        sts = [s[k]["slope"] for s in summaries if k in s]
        if not sts or all(st["n"] < 2 for st in sts):
            continue
        lo = [st["mean"] - st["ci95"] for st in sts]
        hi = [st["mean"] + st["ci95"] for st in sts]
        worded = (
            ""
            if bound is None
            else (
                f"; every interval lies below the bound's exponent {bound}"
                if max(hi) < bound
                else f"; an interval reaches the bound's exponent {bound}"
            )
        )
        L.append(
            f"- **{short}**: slope of T against 1/epsilon "
            f"{_range([st['mean'] for st in sts], '.2f')} over the {len(sts)} setting(s) "
            f"(95% intervals from {min(lo):.2f} to {max(hi):.2f}){worded}."
        )
    t = targets[-1]
    reach = {short: [s[k]["reach"][t] for s in summaries if k in s] for k, short, _, _ in LEARNERS}
    parts = [
        f"{short} {_range(v, ',.0f')}" if any(not math.isnan(x) for x in v) else f"{short} none"
        for short, v in reach.items()
        if v
    ]
    L.append(
        f"- T needed for the smallest target epsilon = {t:g} (mean curve, per setting): "
        + "; ".join(parts)
        + " (none: not reached by the largest T)."
    )
    if len(literal):
        n_div = int(literal["diverged"].astype(bool).sum())
        L.append(
            f"- Dai's literal steps theta/t diverged in {n_div} of {len(literal)} cells "
            f"(theta = theta_nu B²/epsilon is the first step)."
        )
    L += [
        "- The paper's exponents are upper bounds (Corollary 1; its reading of Dai et al.): a "
        "measured slope below a bound is consistent with it, and shows neither learner "
        "needing the bound's number of examples on these data.",
    ]
    return L


def _B_sweep(cfg: dict) -> bool:
    return len(grid.as_list(cfg["dataset"].get("rkhs_norm"))) > 1


def sources(cfg: dict) -> list[str]:
    """Where each setting of the rate design comes from; the assumptions name the config's
    theta nu (which of Dai et al.'s theorems allow it), B and label noise."""
    dsgd = cfg["methods"].get(roles()[1], {})
    theta_nu = [float(v) for v in grid.as_list(dsgd.get("theta_nu", 1.5))]
    if all(v.is_integer() for v in theta_nu):
        tn = (
            "theta nu = "
            + ", ".join(f"{v:g}" for v in theta_nu)
            + ", positive integers as Theorems 5–6 (and so the generalisation bound) need"
        )
    elif theta_nu == [1.5]:
        tn = (
            "theta nu = 1.5, inside (1, 2): allowed by Theorem 4 only, outside "
            "the theta nu in ℤ₊ that Theorems 5–6 (and so the generalisation bound) need"
        )
    else:
        tn = "theta nu = " + ", ".join(f"{v:g}" for v in theta_nu)
    norms = ", ".join(f"{v:g}" for v in grid.as_list(cfg["dataset"].get("rkhs_norm")))
    sigma = _noise(cfg)
    tail = (
        "noise-free labels, so the best-in-ball risk is 0 and the excess risk is exactly the "
        "test loss."
        if not sigma
        else "Gaussian label noise sigma = "
        + ", ".join(f"{v:g}" for v in sigma)
        + " on the training and validation labels and clean test labels, so the target is "
        "the Bayes predictor (risk sigma²/2 on noisy labels) and the excess risk is exactly "
        "the test loss."
    )
    return [
        *SOURCES[:4],
        "- Assumed where the papers are silent: nu = epsilon/B² exactly (the paper gives only "
        f"O(epsilon/B²)); {tn}; the cap "
        "on the first steps (gamma_t = theta/(t + theta/cap), selected on validation; without it "
        "the pass diverges); "
        f"B = the target's RKHS norm ({norms}); Shrinking Gradient's c as in theorem1; one pass "
        "over a fixed sample (Dai et al. sample fresh data every iteration; a single pass is the "
        f"same); {tail}",
        "",
    ]


SOURCES = [
    "Settings and their sources:",
    "",
    "- ILN paper, Section 4 (the paragraphs on Dai et al.): Dai et al.'s bound holds for a fixed "
    "regularisation and the regularised objective; excess risk epsilon over the best f in the "
    "B-ball needs regularisation O(epsilon/B²) (Sridharan et al. 2009), giving O(B⁴/epsilon⁴) "
    "examples for Doubly SGD against O(B²/epsilon²) for Shrinking Gradient (Corollary 1, "
    "with Theorem 1's eta = B/sqrt(T) and m = O(B⁴ T log(BT)); the O-constant of m is the "
    "config's c).",
    "- Dai et al.: the objective (nu/2)‖f‖² + R(f) (their Eq. 1), the update "
    "f_{t+1} = f_t − gamma_t (zeta_t + nu f_t) (Eq. 6; Algorithm 1 lines 5–6), the steps "
    "gamma_t = theta/t with theta nu in (1, 2) ∪ ℤ₊ (Theorem 4; Theorem 5 and the "
    "generalisation bound, Theorem 6, ask for theta nu in ℤ₊), one random feature per "
    "iteration (Algorithm 1), and the final iterate f_{t+1} (Theorems 4–6).",
]


# ----------------------------------------------------------------------------------------------
# exponents against the two bounds, where they can be told apart (label noise, a B sweep)

# the exponents of T in 1/epsilon and in B: Corollary 1's O(B²/ε²), the reading of Dai et al.'s
# O(B⁴/ε⁴)
EXPONENTS = (2, 4)
# the learners whose exponents the section measures, and the two with a bound (the words)
COMPARED = ("sg_avg", "dsgd_dai", "sg_final", "dsgd_val")
BOUNDED = ("sg_avg", "dsgd_dai")


def _noise(cfg: dict) -> list[float]:
    return [float(v) for v in grid.as_list(cfg["dataset"].get("noise") or 0.0) if v]


def exponents(r: ReportData, targets: list[float]) -> dict | None:
    """The exponents of ``T(epsilon)`` where the two bounds can be told apart: ``None`` unless
    the labels are noisy (``dataset.noise > 0``; with noise-free realisable labels a learner can
    beat every worst-case rate). Per learner and task (``rkhs_norm`` = B): the slope of ``T``
    against ``1/epsilon`` (:func:`ilnrun.rate.slope_over_repetitions`); per learner and target,
    with two or more ``rkhs_norm`` values, the slope of ``T`` against ``B``
    (:func:`ilnrun.rate.b_slope_over_repetitions`); per task the mean predictor's test loss
    (its excess risk: the test labels are clean). Each task uses its own targets, those below
    its mean predictor's test loss (:func:`task_targets`). Returns ``eps`` ({learner: [(B,
    stats)]}), ``B`` ({learner: [(epsilon, stats)]}), ``const`` ([(B, loss)]), ``noise``,
    ``targets``, ``task_targets`` ({B: the targets used})."""
    runs = r.runs
    if not _noise(r.cfg) or "preset" not in runs or "epsilon" not in runs:
        return None
    dai = runs[(runs["method"] == roles()[1]) & (runs["preset"] == "dai")]
    if dai.empty or comparator_ok(r.cfg):
        return None
    tasks = _targets_tasks(r, dai)[1]
    eps: dict[str, list] = {}
    by_B: dict[str, dict[float, dict]] = {}
    const = []
    per_task: dict[float, list[float]] = {}
    for _, g in _groups(runs, tasks):
        B = float(g["rkhs_norm"].iloc[0])
        per_task[B] = task_targets(r.cfg, g, targets)
        curves = learner_curves(g, per_task[B])
        for k in COMPARED:
            if k in curves:
                eps.setdefault(k, []).append((B, slope_over_repetitions(curves[k])))
                by_B.setdefault(k, {})[B] = curves[k]
        if "test_loss_const" in g:
            const.append((B, float(g["test_loss_const"].mean())))
    Bslope: dict[str, list] = {}
    if "rkhs_norm" in tasks and len(tasks) == 1:
        for k, per_B in by_B.items():
            if len(per_B) > 1:
                Bslope[k] = [
                    (t, b_slope_over_repetitions({B: c[t] for B, c in per_B.items() if t in c}, t))
                    for t in targets
                ]
    return {
        "eps": eps,
        "B": Bslope,
        "const": const,
        "noise": _noise(r.cfg),
        "targets": targets,
        "task_targets": per_task,
    }


def _ci(st: dict) -> str:
    return f"{st['mean']:.2f} [{_lo(st):.2f}, {_hi(st):.2f}]"


def _where(lo: float, hi: float) -> str:
    """Where an interval lies against the two exponents 2 and 4."""
    a, b = EXPONENTS
    if hi < a:
        return f"below both {a} and {b}"
    if lo > b:
        return f"above both {a} and {b}"
    if lo <= a <= hi:
        return f"holds {a}" + (f" and {b}" if hi >= b else f", below {b}")
    if hi < b:
        return f"between {a} and {b}"
    return f"above {a}, holds {b}"


def _pooled(sts: list[dict]) -> tuple[float, float, list[str]] | None:
    """The lowest lower and highest upper end of the intervals with a slope, and the places
    of every interval against the exponents."""
    ok = [st for st in sts if st["n"] > 1 and math.isfinite(st["mean"])]
    if not ok:
        return None
    return min(map(_lo, ok)), max(map(_hi, ok)), sorted({_where(_lo(st), _hi(st)) for st in ok})


def exponent_words(ex: dict) -> str:
    """The headline sentence for the two bounded learners (Corollary 1's averaged predictor,
    Doubly SGD under the paper's reading): the exponent of ``T`` in ``1/epsilon`` per B and
    in ``B`` per epsilon, the decades of ``epsilon`` they span, where their intervals lie
    against their bound, and :func:`_verdict`."""
    shorts = {k: short for k, short, _, _ in LEARNERS}
    bounds = {k: b for k, _, _, b in LEARNERS}
    sigma = ", ".join(f"{v:g}" for v in ex["noise"])
    per_task = ex.get("task_targets") or {}
    left_out = {B: [t for t in ex["targets"] if t not in ts] for B, ts in per_task.items()}
    below = all(c > ex["targets"][0] for _, c in ex["const"]) or any(left_out.values())
    const = _range([c for _, c in ex["const"]], ".2g")
    spans = [math.log10(ts[0] / ts[-1]) for ts in per_task.values() if ts] or [
        math.log10(ex["targets"][0] / ex["targets"][-1])
    ]
    span = _range(spans, ".1f")
    parts = []
    for k in BOUNDED:
        if k not in ex["eps"]:
            continue
        e = _pooled([st for _, st in ex["eps"][k]])
        if e is None:
            parts.append(f"{shorts[k]}: no slope (fewer than two targets reached inside the grid)")
            continue
        dec = [st["decades"] for _, st in ex["eps"][k] if math.isfinite(st["decades"])]
        text = (
            f"{shorts[k]} (bound: exponent {bounds[k]} in 1/ε and in B): T grows as (1/ε)^p "
            "with p = "
            + "; ".join(f"{_ci(st)} at B = {B:g}" for B, st in ex["eps"][k] if st["n"] > 1)
            + f" (over {_range(dec, '.1f')} of the targets' {span} decades of ε)"
        )
        sts = [(t, st) for t, st in ex["B"].get(k, []) if st["n"] > 1]
        if sts:
            lo, hi = min(_lo(st) for _, st in sts), max(_hi(st) for _, st in sts)
            text += (
                f", and as B^q at fixed ε with q = {_range([st['mean'] for _, st in sts], '.2f')} "
                f"(at {len(sts)} ε from {min(t for t, _ in sts):g} to "
                f"{max(t for t, _ in sts):g}; 95% intervals from {lo:.2f} to {hi:.2f})"
            )
        ends = [x for x in (e, _pooled([st for _, st in sts])) if x is not None]
        hi = max(x[1] for x in ends)
        lo = min(x[0] for x in ends)
        bound = bounds[k]
        text += (
            f": every interval below {bound}"
            if hi < bound
            else f": every interval above {bound}"
            if lo > bound
            else f": intervals reach {bound}"
        )
        parts.append(text)
    return (
        f"what the data show about O(B²/ε²) (Shrinking Gradient's averaged predictor, Corollary "
        f"1) against O(B⁴/ε⁴) (Doubly SGD, the paper's reading of Dai et al.), with label noise "
        f"σ = {sigma} on the training and validation labels and clean test labels (excess risk "
        f"= test loss exactly), "
        + (
            (
                f"every target ε below the mean predictor's excess risk ({const} over B)"
                if not any(left_out.values())
                else "the targets ε below each B's mean predictor's excess risk "
                f"({const} over B; left out: "
                + "; ".join(
                    f"ε = {', '.join(f'{t:g}' for t in out)} at B = {B:g}"
                    for B, out in left_out.items()
                    if out
                )
                + ")"
            )
            if below
            else f"not every target ε below the mean predictor's excess risk ({const} over B)"
        )
        + ", exponents the per-repetition log-log slopes of T(ε) with 95% intervals: "
        + "; ".join(parts)
        + f". {_verdict(ex)}"
    )


def _verdict(ex: dict) -> str:
    """In words: which exponents the data support. The bounds are upper bounds, so exponents
    below both say neither bound is tight here; Doubly SGD's below 4 show no sign of the
    ``B⁴/ε⁴`` dependence; per B, whether Doubly SGD's exponent in ``1/epsilon`` lies above,
    below or together with Shrinking Gradient's (disjoint or overlapping intervals)."""
    ends = {}
    for k in BOUNDED:
        sts = [st for _, st in ex["eps"].get(k, [])] + [st for _, st in ex["B"].get(k, [])]
        ends[k] = _pooled(sts)
    sg, ds = ends["sg_avg"], ends["dsgd_dai"]
    if sg is None or ds is None:
        return "Without slopes for both learners the data say nothing about the two exponents."
    a, b = EXPONENTS
    words = []
    if sg[1] < a and ds[1] < a:
        words.append(
            f"Neither bound is tight on these data: every exponent interval of both learners "
            f"lies below {a} (the bounds are upper bounds: measured exponents below both are "
            "consistent with both and show neither learner needing its bound's number of "
            "examples)"
        )
    elif ds[1] < b:
        words.append(
            f"Doubly SGD's exponents stay below {b}: the data show no sign of the B⁴/ε⁴ "
            "dependence (an upper bound that is not tight here)"
        )
    else:
        words.append(f"Doubly SGD's intervals reach {b}: the data allow the B⁴/ε⁴ dependence")
    sg_e = dict(ex["eps"].get("sg_avg", []))
    ds_e = dict(ex["eps"].get("dsgd_dai", []))
    common = [B for B in sg_e if B in ds_e and sg_e[B]["n"] > 1 and ds_e[B]["n"] > 1]
    if common:
        lower = [B for B in common if _hi(ds_e[B]) < _lo(sg_e[B])]
        higher = [B for B in common if _lo(ds_e[B]) > _hi(sg_e[B])]
        both = [B for B in common if B not in lower and B not in higher]
        groups = [(w, Bs) for w, Bs in (("below", lower), ("above", higher)) if Bs]
        groups += [("overlapping", both)] if both else []
        ref = ["Shrinking Gradient's averaged predictor's"] + ["it"] * len(groups)
        said = [f"{w} {ref[i]} at {_Bs(Bs)}" for i, (w, Bs) in enumerate(groups)]
        words.append(
            f"Doubly SGD's exponent in 1/ε lies {', '.join(said)} (of {len(common)} B; "
            "below and above: disjoint 95% intervals)"
            + (
                ": on these data Doubly SGD's T grows more slowly than Shrinking Gradient's as "
                "ε shrinks (the bounds, upper bounds, order them the other way)"
                if lower and not higher and not both
                else ""
            )
        )
    return "; ".join(words) + "."


def _lo(st: dict) -> float:
    return st["mean"] - st["ci95"]


def _hi(st: dict) -> float:
    return st["mean"] + st["ci95"]


def _Bs(Bs: list[float]) -> str:
    return "B = " + ", ".join(f"{B:g}" for B in Bs)


def exponent_tables(ex: dict) -> list[str]:
    """The section's tables: the slope of T against 1/epsilon per learner and B, the slope of
    T against B per learner and epsilon, and the words of :func:`exponent_words`."""
    shorts = {k: short for k, short, _, _ in LEARNERS}
    rows = []
    for k, per in ex["eps"].items():
        for B, st in per:
            rows.append(
                [
                    shorts[k],
                    f"{B:g}",
                    _ci(st) if st["n"] > 1 else "—",
                    f"{1 / st['x_hi']:g}–{1 / st['x_lo']:g}" if st["n"] else "—",
                    f"{st['decades']:.1f}" if math.isfinite(st["decades"]) else "—",
                    f"{st['n']}" + (f" ({st['dropped']} without)" if st["dropped"] else ""),
                ]
            )
    L = [
        "### Exponents against O(B²/ε²) and O(B⁴/ε⁴)",
        "",
        "With label noise on the training and validation labels and clean test labels, a "
        "predictor's test loss is its excess risk exactly, and the worst-case exponents can show. "
        "Exponent of T in 1/ε per B (per-repetition log-log slope of T(ε) over the targets its "
        "own curve reaches inside the grid, 95% Student-t interval of the mean; the ε range and "
        "its decades are those of the repetitions' points):",
        "",
        md_table(["learner", "B", "exponent [95% CI]", "ε used", "decades", "repetitions"], rows),
        "",
    ]
    rows = []
    for k, per in ex["B"].items():
        for t, st in per:
            rows.append(
                [
                    shorts[k],
                    f"{t:g}",
                    _ci(st) if st["n"] > 1 else "—",
                    f"{st['x_lo']:g}–{st['x_hi']:g}" if st["n"] else "—",
                    f"{st['n']}" + (f" ({st['dropped']} without)" if st["dropped"] else ""),
                ]
            )
    if rows:
        L += [
            "Exponent of T in B at fixed ε (per-repetition log-log slope of T(ε) against the "
            "target's RKHS norm B = the learner's B, over the B whose curve reaches ε inside "
            "the grid; bounds: 2 for Shrinking Gradient's average, 4 for Doubly SGD):",
            "",
            md_table(["learner", "ε", "exponent [95% CI]", "B used", "repetitions"], rows),
            "",
        ]
    return L + [f"In words: {exponent_words(ex)}", ""]
