"""Theorem 1 (regret against the best f in the B-ball, its log-log slope in T) and Lemma 5
(the bound on |alpha|_1), when the run recorded them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...stats import slope_interval
from ..data import ReportData, fmt, label, md_table


def decades(Ts: list[float]) -> list[tuple[float, float]]:
    """The windows ``[10^j, 10^(j+1)]`` that hold at least two of the ``Ts``, then the whole
    range (when it is wider than one window)."""
    Ts = sorted(set(Ts))
    if len(Ts) < 2:
        return []
    lo, hi = math.floor(math.log10(Ts[0]) + 1e-9), math.ceil(math.log10(Ts[-1]) - 1e-9)
    out = [
        (10.0**j, 10.0 ** (j + 1))
        for j in range(lo, hi)
        if sum(10**j <= t <= 10 ** (j + 1) for t in Ts) >= 2
    ]
    if len(out) != 1 or out[0] != (Ts[0], Ts[-1]):
        out.append((Ts[0], Ts[-1]))
    return out


def slope_rows(g: pd.DataFrame, metric: str = "regret") -> list[list[str]]:
    """Per T-window: the log-log slope of ``metric`` against T with its 95% interval over
    repetitions (the slope of each repetition's own points, then the Student-t interval of
    their mean: :func:`ilnrun.stats.slope_interval`)."""
    rows = []
    for a, b in decades(g["T"].tolist()):
        w = g[(g["T"] >= a) & (g["T"] <= b)]
        per = {
            rep: (h["T"].to_numpy(float), h[metric].to_numpy(float))
            for rep, h in w.groupby("repetition")
        }
        st = slope_interval(per)
        Ts = sorted(w["T"].unique())
        rows.append(
            [
                f"{int(Ts[0]):,}–{int(Ts[-1]):,}"
                + (" (all)" if (a, b) == (g["T"].min(), g["T"].max()) else ""),
                len(Ts),
                fmt(st["mean"], st["ci95"], 3),
                f"[{st['mean'] - st['ci95']:.3f}, {st['mean'] + st['ci95']:.3f}]"
                if st["n"] > 1
                else "—",
                f"{st['n']}" + (f" ({st['dropped']} without a slope)" if st["dropped"] else ""),
            ]
        )
    return rows


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
                "**never failed**."
                if (ratio <= 1).all()
                else f"**failed in {(ratio > 1).sum()} passes**."
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
        "`f_t` evaluated exactly (the comparator by the exact kernel); "
        "`R_T (estimated)` uses the learner's own online predictions instead. "
        "Mean ± 95% CI over repetitions, for every setting of the proposed learner (the others: "
        "their setting selected on validation loss). The theorem bounds the expected "
        "regret by O(B√T), i.e. a log-log slope ≤ ½ asymptotically.",
        "",
    ]
    L += [target_sentence(r), ""]
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
            "Log-log slope of the regret against T with a 95% interval over repetitions: each "
            "repetition's own least-squares slope of log R_T on log T over the window, then the "
            "Student-t interval of their mean (repetitions with a non-positive regret in the "
            "window lose those points; with fewer than two left they have no slope). Theorem 1: "
            "≤ ½ asymptotically.",
            "",
            md_table(
                ["T window", "T values", "slope (mean ± 95% CI)", "interval", "repetitions"],
                slope_rows(raw[(m, setting)]),
            ),
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
