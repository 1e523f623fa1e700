"""Theorem 1 (regret against the best f in the B-ball, its log-log slope in T) and Lemma 5
(the bound on |alpha|_1), when the run recorded them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...stats import loglog_slope, paired_difference, significant, slope_interval
from ..data import ReportData, fmt, label, md_table


def decades(Ts: list[float]) -> list[tuple[float, float]]:
    """The windows ``[10^j, 10^(j+1)]`` that hold at least two of the ``Ts``, then the last
    decade ``[max T / 10, max T]`` (when it holds two and is not one of those windows), then the
    whole range (when it is wider than one window)."""
    Ts = sorted(set(Ts))
    if len(Ts) < 2:
        return []
    lo, hi = math.floor(math.log10(Ts[0]) + 1e-9), math.ceil(math.log10(Ts[-1]) - 1e-9)
    out = [
        (10.0**j, 10.0 ** (j + 1))
        for j in range(lo, hi)
        if sum(10**j <= t <= 10 ** (j + 1) for t in Ts) >= 2
    ]
    last = last_decade(Ts)
    if last is not None and not any(_same_Ts(Ts, last, w) for w in out):
        out.append(last)
    if len(out) != 1 or out[0] != (Ts[0], Ts[-1]):
        out.append((Ts[0], Ts[-1]))
    return out


def last_decade(Ts: list[float]) -> tuple[float, float] | None:
    """``[max T / 10, max T]``, the window of the largest T (the asymptotic regime Theorem 1 is
    about); None when it holds fewer than two of the ``Ts``."""
    top = max(Ts)
    w = (top / 10, float(top))
    return w if sum(w[0] * (1 - 1e-9) <= t <= w[1] for t in set(Ts)) >= 2 else None


def _in(t: float, w: tuple[float, float]) -> bool:
    return w[0] * (1 - 1e-9) <= t <= w[1] * (1 + 1e-9)


def _same_Ts(Ts: list[float], a: tuple[float, float], b: tuple[float, float]) -> bool:
    return [t for t in Ts if _in(t, a)] == [t for t in Ts if _in(t, b)]


def rep_slopes(g: pd.DataFrame, w: tuple[float, float], metric: str = "regret") -> pd.Series:
    """Each repetition's own least-squares slope of ``log metric`` on ``log T`` over the
    T-window ``w`` (NaN where fewer than two positive points), indexed by repetition."""
    h = g[[_in(t, w) for t in g["T"]]]
    return pd.Series(
        {
            rep: loglog_slope(x["T"].to_numpy(float), x[metric].to_numpy(float))
            for rep, x in h.groupby("repetition")
        },
        dtype=float,
    )


def window_stats(g: pd.DataFrame, w: tuple[float, float], metric: str = "regret") -> dict:
    """:func:`ilnrun.stats.slope_interval` of ``metric`` over the T-window ``w``: ``mean``,
    ``ci95``, ``n``, ``dropped``, plus ``lo``/``hi`` (the interval) and ``Ts`` (its T)."""
    h = g[[_in(t, w) for t in g["T"]]]
    per = {
        rep: (x["T"].to_numpy(float), x[metric].to_numpy(float))
        for rep, x in h.groupby("repetition")
    }
    st = slope_interval(per)
    return {
        **st,
        "lo": st["mean"] - st["ci95"],
        "hi": st["mean"] + st["ci95"],
        "Ts": sorted(h["T"].unique()),
    }


def window_label(g: pd.DataFrame, w: tuple[float, float]) -> str:
    Ts = sorted(g["T"].unique())
    sel = [t for t in Ts if _in(t, w)]
    tags = []
    if (w[0], w[1]) == (Ts[0], Ts[-1]):
        tags.append("all")
    last = last_decade(Ts)
    if last is not None and _same_Ts(Ts, w, last) and len(sel) < len(Ts):
        tags.append("last decade")
    return f"{int(sel[0]):,}–{int(sel[-1]):,}" + (f" ({', '.join(tags)})" if tags else "")


def slope_rows(g: pd.DataFrame, metric: str = "regret") -> list[list[str]]:
    """Per T-window (:func:`decades`: each decade, the last decade, all T): the log-log slope of
    ``metric`` against T with its 95% interval over repetitions (the slope of each
    repetition's own points, then the Student-t interval of their mean:
    :func:`ilnrun.stats.slope_interval`)."""
    rows = []
    for w in decades(g["T"].tolist()):
        st = window_stats(g, w, metric)
        rows.append(
            [
                window_label(g, w),
                len(st["Ts"]),
                fmt(st["mean"], st["ci95"], 3),
                f"[{st['lo']:.3f}, {st['hi']:.3f}]" if st["n"] > 1 else "—",
                f"{st['n']}" + (f" ({st['dropped']} without a slope)" if st["dropped"] else ""),
            ]
        )
    return rows


def against_half(st: dict) -> str:
    """Where a slope's 95% interval lies against Theorem 1's ½: ``below ½``, ``above ½``,
    ``contains ½ and 0`` (the data cannot tell a slope of ½ from a flat regret), or
    ``consistent with ½`` (the interval holds ½ and excludes 0)."""
    if st["n"] < 2 or math.isnan(st["ci95"]):
        return "no interval"
    if st["hi"] < 0.5:
        return "below ½"
    if st["lo"] > 0.5:
        return "above ½"
    if st["lo"] <= 0:
        return "contains ½ and 0"
    return "consistent with ½"


def proof_c(B: float, T: float) -> float:
    """The ``c`` of the theory preset's ``m = ⌈c B⁴ T ln(max(BT, e))⌉`` that the proof of
    Theorem 1 (ILN Section 5.1) takes: ``m = ((16B + 1)B)² T log γ`` with
    ``γ = max(((16B + 1)ηT + B)²/η², e)`` and ``η = B/(2√T)``, divided by
    ``B⁴ T ln(max(BT, e))`` (docs/algorithms.md §1.5: ≈ 890 for B = 1, T = 200)."""
    eta = B / (2 * math.sqrt(T))
    gamma = max(((16 * B + 1) * eta * T + B) ** 2 / eta**2, math.e)
    m = ((16 * B + 1) * B) ** 2 * T * math.log(gamma)
    return m / (B**4 * T * math.log(max(B * T, math.e)))


def c_clause(setting: str, B: float, T: float) -> str:
    """The setting's ``c`` against the proof's constant at the largest ``T`` (:func:`proof_c`);
    ``''`` for a setting without ``c`` (not the theory preset)."""
    from ..data import setting_values

    c = setting_values(setting).get("c")
    try:
        c = float(c) if c is not None else None
    except ValueError:
        c = None
    if c is None:
        return ""
    cp = proof_c(B, T)
    return (
        f" The preset's c = {c:g} is {c / cp:.2g}× the constant the proof of Theorem 1 takes "
        f"(c ≈ {cp:.3g} at B = {B:g}, T = {int(T):,}; ILN Section 5.1), so the m run is not the "
        "theorem's m."
    )


def vacuity_clause(g: pd.DataFrame, B: float) -> str:
    """Whether a bound of order ``B√T`` says anything here: at the largest ``T``, predicting the
    training mean costs about ``T × test_loss_const`` over the pass (its per-round loss on fresh
    points); when that is below ``B√T``, a constant predictor meets a regret bound of order
    ``B√T`` without learning, and the bound is vacuous at these T (``g``: one row per
    repetition and T)."""
    if "test_loss_const" not in g:
        return ""
    top = float(g["T"].max())
    const = float(g.loc[g["T"] == top, "test_loss_const"].mean())
    if not math.isfinite(const):
        return ""
    cost, bound = top * const, B * math.sqrt(top)
    if cost >= bound:
        return (
            f" At T = {int(top):,} predicting the mean costs ≈ {cost:.3g} (T × its test loss), "
            f"above B√T = {bound:.3g}: the bound is not vacuous there."
        )
    return (
        f" At T = {int(top):,} predicting the mean costs ≈ {cost:.3g} (T × its test loss), "
        f"{bound / cost:.2g}× below B√T = {bound:.3g}: a constant predictor meets a regret "
        'bound of order B√T without learning, so "regret ≤ c·B√T" is **vacuous** at these T.'
    )


def rate_sentences(g: pd.DataFrame, B: float) -> list[str]:
    """Where Theorem 1's O(B√T) does and does not hold, with numbers (docs/protocol.md §3).

    ``g``: one row per repetition and T (``regret``, optionally ``test_loss_zero``). The bound's
    leading term is ``B²/η = B√T`` (paper Eq. 15 with ``η = B/√T``), so the mean regret is put
    against ``B√T`` at every T; the slope's 95% interval per window against ½; and a regret
    that grows linearly, ``R_T ≈ r T`` with ``r`` its per-round value at the largest T, stays
    below ``B√T`` until ``T* = (B / r)²``: before ``T*`` a linear regret does not contradict
    the bound, and the asymptotic slope ½ cannot be seen."""
    mean = g.groupby("T")["regret"].mean().sort_index()
    Ts = mean.index.to_numpy(float)
    if len(Ts) < 2:
        return []
    ratio = mean.to_numpy(float) / (B * np.sqrt(Ts))
    i = int(np.nanargmax(ratio))
    below = "**below**" if (ratio <= 1).all() else "**not below**"
    L = [
        f"Against the bound's leading term B√T (paper Eq. 15 with η = B/√T; the theorem's O(·) "
        f"hides a larger constant): the mean regret is {below} B√T at every T, at most "
        f"{ratio[i]:.3g} B√T (T = {int(Ts[i]):,})"
        + (
            "."
            if (ratio <= 1).all()
            else f"; above it at T = {', '.join(f'{int(t):,}' for t in Ts[ratio > 1])}."
        )
    ]
    parts = []
    for w in decades(g["T"].tolist()):
        st = window_stats(g, w)
        if st["n"] > 1:
            parts.append(
                f"{window_label(g, w)}: {st['mean']:.3f} [{st['lo']:.3f}, {st['hi']:.3f}], "
                f"{against_half(st)}"
            )
    if parts:
        L.append("Slope against Theorem 1's ½ (95% interval): " + "; ".join(parts) + ".")
    top = Ts[-1]
    r = float(mean.iloc[-1]) / top
    if r > 0:
        star = (B / r) ** 2
        s = (
            f"Per-round regret at the largest T = {int(top):,}: R_T / T = {r:.3g}. A regret "
            f"growing linearly at that rate stays below B√T until T* = (B / (R_T/T))² ≈ "
            f"{star:.2g}"
        )
        if star > top:
            s += (
                f", {star / top:.3g}× the largest T run: up to T = {int(top):,} the regret "
                "stays below B√T whatever its slope, and whether the slope settles at ½ "
                "asymptotically can be neither confirmed nor refuted at these T."
            )
        else:
            s += ", inside the range run: past it the regret exceeds B√T."
        scale = [
            (name, float(g[g["T"] == top][col].mean()))
            for col, name in (("test_loss_zero", "zero"), ("test_loss_const", "mean"))
            if col in g and g[g["T"] == top][col].notna().any()
        ]
        if scale:
            s += (
                " For scale, per round at that T (their test losses): "
                + ", ".join(f"the {n} predictor's {v:.3g}" for n, v in scale)
                + "; R_T / T is "
                + ", ".join(f"{r / v:.2g}× the {n} predictor's" for n, v in scale)
                + "."
            )
        L.append(s)
    return L


def headline_clause(g: pd.DataFrame, B: float, setting: str = "") -> str:
    """The headline's words on Theorem 1: the regret's log-log slope over **every** T-window
    (:func:`decades`) with its 95% interval and where it lies against ½ (:func:`against_half`),
    which windows exclude ½, the largest mean regret in units of B√T, whether that bound is
    vacuous (:func:`vacuity_clause`) and the setting's c against the proof's
    (:func:`c_clause`). ``g``: one row per repetition and T. Never "consistent with ½" for an
    interval that also holds 0."""
    Ts = sorted(g["T"].unique())
    if len(Ts) < 2:
        return ""
    parts, exclude = [], []
    windows = decades(Ts)
    # a window holding the same T as a later one (e.g. the one decade and "all") once
    windows = [
        w for i, w in enumerate(windows) if not any(_same_Ts(Ts, w, v) for v in windows[i + 1 :])
    ]
    for w in windows:
        st = window_stats(g, w)
        if st["n"] < 2:
            continue
        where = against_half(st)
        name = window_label(g, w)
        parts.append(f"{name}: **{st['mean']:.3f}** [{st['lo']:.3f}, {st['hi']:.3f}], {where}")
        if where in ("below ½", "above ½"):
            exclude.append(name)
    if not parts:
        return ""
    mean = g.groupby("T")["regret"].mean()
    ratio = float((mean / (B * np.sqrt(mean.index.to_numpy(float)))).max())
    n_all = len(parts)
    if n_all == 1:
        which = f"its interval {'excludes' if exclude else 'does not exclude'} ½"
    elif exclude:
        which = f"{len(exclude)} of the {n_all} windows exclude ½ ({'; '.join(exclude)})"
    else:
        which = f"none of the {n_all} windows excludes ½"
    return (
        f" Log-log slope of the regret against T, per T-window (95% interval over repetitions; "
        f"Theorem 1: ½ asymptotically): {'; '.join(parts)}. {which[0].upper() + which[1:]}. "
        f"The mean regret is at most {ratio:.3g} B√T over all T."
        + vacuity_clause(g, B)
        + c_clause(setting, B, float(max(Ts)))
    )


def setting_slope_rows(raws: list[tuple[str, pd.DataFrame]]) -> list[list[str]]:
    """Does the slope depend on the setting (e.g. Shrinking Gradient's ``c``)? Per T-window
    that every setting covers: each later setting's per-repetition slope minus the first
    setting's on the same repetition (same data), mean with its 95% t-interval
    (:func:`ilnrun.stats.paired_difference`)."""
    if len(raws) < 2:
        return []
    (s0, g0), rows = raws[0], []
    for w in decades(g0["T"].tolist()):
        a = rep_slopes(g0, w)
        for s1, g1 in raws[1:]:
            if set(g1["T"]) != set(g0["T"]):
                continue
            d = paired_difference(rep_slopes(g1, w), a)
            rows.append(
                [
                    window_label(g0, w),
                    f"{s1} − {s0}",
                    fmt(d["mean"], d["ci"], 3),
                    f"[{d['mean'] - d['ci']:.3f}, {d['mean'] + d['ci']:.3f}]"
                    if d["n"] > 1
                    else "—",
                    "yes" if significant(d) else "no",
                    d["n"],
                ]
            )
    return rows


def cost_lines(r: ReportData) -> list[str]:
    """The recorded seconds per cell (``wall_s``: the pass, ``eval_s``: the evaluation; wall
    clock, so above CPU time on a loaded machine; data generation and the exact diagnostics
    are not in them), per learner and T: mean per cell and total."""
    runs = r.runs
    if not {"wall_s", "eval_s"} <= set(runs):
        return []
    rows = []
    for m in r.methods:
        h = runs[runs["method"] == m]
        for T, x in h.groupby("T"):
            sec = x["wall_s"] + x["eval_s"]
            rows.append([label(m), int(T), len(x), f"{sec.mean():.3g}", f"{sec.sum():,.0f}"])
    total = float((runs["wall_s"] + runs["eval_s"]).sum())
    return [
        "## Recorded time per cell",
        "",
        "Wall seconds of each cell's pass plus its evaluation as `runs.csv` records them "
        "(`wall_s + eval_s`; on a shared machine wall time exceeds CPU time; the data "
        "generation and the exact regret diagnostics are not included). The run's CPU time and "
        "peak memory, where measured, are in the description above.",
        "",
        md_table(["learner", "T", "cells", "mean s per cell", "total s"], rows),
        "",
        f"Total over all {len(runs)} cells: {total:,.0f} s.",
        "",
    ]


def target_sentence(r: ReportData) -> str:
    """The target's RKHS norm against the comparator radius B (Theorem 1 needs the best
    predictor in the ball; with the target inside it, the best loss in the ball is ~0)."""
    ds, B = r.cfg["dataset"], r.cfg["evaluation"].get("regret_B")
    norm = ds.get("rkhs_norm")
    if norm is None:
        return (
            f"Target norm: not controlled (labels scaled by the largest training label), "
            f"comparator radius B = {B}. A 'best loss in ball' that grows with T means the "
            "target lies outside the ball, and the regret is then measured against a "
            "comparator that itself fits the data badly."
        )
    inside = "inside" if norm <= B else "**outside**"
    return (
        f"Target norm: the target is scaled to ‖f*‖_H = {norm} in the RKHS of the kernel "
        f"(dataset option `rkhs_norm`), comparator radius B = {B}: the target lies {inside} the "
        "B-ball, so the best predictor in the ball fits the noiseless training labels (best loss "
        "in ball ≈ 0, up to the bisection's tolerance) and the regret is the learner's own "
        "cumulative loss."
    )


def regret_slopes(g: pd.DataFrame) -> tuple[float, float] | None:
    """Least-squares slopes of log(mean regret) against log(T): over all T, and over the three
    largest T (the asymptotic regime); None with fewer than three positive means."""
    ok = g[g["regret_mean"] > 0].sort_values("T")
    if len(ok) < 3:
        return None
    x, y = np.log(ok["T"].to_numpy(float)), np.log(ok["regret_mean"].to_numpy(float))
    return float(np.polyfit(x, y, 1)[0]), float(np.polyfit(x[-3:], y[-3:], 1)[0])


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


def render(r: ReportData) -> list[str]:
    L: list[str] = []
    runs = r.runs
    if "lemma5_max_ratio" in runs and runs["lemma5_max_ratio"].notna().any():
        ratio = runs["lemma5_max_ratio"].dropna()
        L += [
            "## Lemma 5: |α^(t+1)|₁ ≤ (16B + 1) Σ_{s≤t} η_s",
            "",
            f"Checked after every round of every pass that records it ({len(ratio)} passes): "
            f"the largest ratio |α|₁ / bound was {ratio.max():.4g}; the bound "
            + (
                "was met in every pass. This checks the implementation, not the data: the "
                "proof of Lemma 5 gives the bound for every pass of the update."
                if (ratio <= 1).all()
                else f"**failed in {(ratio > 1).sum()} passes**: the implementation departs "
                "from the update Lemma 5 is proved for."
            )
            + (
                " (Lemma 5 assumes |y_t| ≤ 1, which the label scaling guarantees on the "
                "training split.)"
                if r.cfg["dataset"].get("rkhs_norm") is None
                else " (Lemma 5 assumes |y_t| ≤ 1; with `rkhs_norm` the labels are not scaled "
                "by their maximum but obey |y| ≤ ‖f*‖_H √k(x, x) by Cauchy–Schwarz.)"
            ),
            "",
        ]
    if "regret" not in runs or not runs["regret"].notna().any() or r.xa != "T":
        return L
    L += [
        "## Theorem 1: regret against the best predictor in the B-ball",
        "",
        "Regret `R_T = Σ_t ½(f_t(x_t) − y_t)² − min_{‖f‖≤B} Σ_t ½(f(x_t) − y_t)²` with "
        "`f_t` and the comparator evaluated exactly (in the primal of the kernel where the "
        "feature map has a finite one, else with the T × T kernel: docs/protocol.md §3.1); "
        "`R_T (estimated)` uses the learner's own online predictions instead. "
        + ("Mean ± 95% CI over repetitions" if r.tested else "One repetition")
        + ", for every setting of the proposed learner (the others: "
        "their setting selected on validation loss). The theorem bounds the expected "
        "regret by O(B√T), i.e. a log-log slope ≤ ½ asymptotically.",
        "",
    ]
    L += [target_sentence(r), ""]
    B = float(r.cfg["evaluation"]["regret_B"])
    raw = {(m, setting): g for m, setting, g in r.regret_raw()}
    for m, setting, g in r.regret_groups():
        rows = [
            [
                int(row["T"]),
                fmt(row["regret_mean"], row["regret_ci95"]),
                fmt(row["regret_estimated_mean"], row["regret_estimated_ci95"]),
                fmt(row["regret_mean"] / math.sqrt(row["T"]), None),
                fmt(row["best_loss_B_mean"], None),
            ]
            for _, row in g.iterrows()
        ]
        L += [
            f"{label(m)} ({setting}):",
            "",
            md_table(["T", "R_T", "R_T (estimated)", "R_T / √T", "best loss in ball"], rows),
            "",
            slope_sentence(g),
            "",
        ]
        if r.tested:  # one repetition: its slope is the sentence above, with no interval
            L += [
                "Log-log slope of the regret against T with a 95% interval over repetitions: "
                "each repetition's own least-squares slope of log R_T on log T over the window, "
                "then the Student-t interval of their mean (repetitions with a non-positive "
                "regret in the window lose those points; with fewer than two left they have no "
                "slope). Theorem 1: ≤ ½ asymptotically.",
                "",
                md_table(
                    ["T window", "T values", "slope (mean ± 95% CI)", "interval", "repetitions"],
                    slope_rows(raw[(m, setting)]),
                ),
                "",
            ]
        L += [f"{line}\n" for line in rate_sentences(raw[(m, setting)], B)]
        if extra := (vacuity_clause(raw[(m, setting)], B) + c_clause(setting, B, max(g["T"]))):
            L += [extra.strip(), ""]
    L += setting_lines(r, raw)
    L += [
        "Theorem 1 is an upper bound on the expected regret: a negative regret means the "
        "learner's iterates did better than every predictor in the ball (they are not "
        "confined to it), which the bound allows. A growing 'best loss in ball' means the "
        "target lies outside the ball of radius B.",
        "",
    ]
    return L + cost_lines(r)


def setting_lines(r: ReportData, raw: dict) -> list[str]:
    """The paired slope differences between the proposed learner's settings
    (:func:`setting_slope_rows`), when it ran more than one."""
    L: list[str] = []
    for m in r.proposed if r.tested else ():  # a paired test needs two repetitions
        raws = [(s, g) for (mm, s), g in raw.items() if mm == m]
        rows = setting_slope_rows(raws)
        if not rows:
            continue
        L += [
            f"Does the slope depend on the setting of {label(m)}? Each repetition's slope under "
            "one setting minus its slope under the first, on the same data; mean with its 95% "
            "interval (significant: the interval excludes 0).",
            "",
            md_table(
                ["T window", "difference", "mean ± 95% CI", "interval", "significant", "reps"],
                rows,
            ),
            "",
        ]
    return L
