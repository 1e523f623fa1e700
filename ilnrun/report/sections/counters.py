"""The budgets as the learners counted them, against the target, and the failed cells."""

from __future__ import annotations

from ..data import ReportData, label, md_table


def _span(g, column: str) -> str:
    return f"{g[column].min():,}–{g[column].max():,}"


def render(r: ReportData) -> list[str]:
    """Per budgeted learner and ``k``: the target, the counted evaluations and their largest
    deviation from the target. The count the target matches (docs/budgets.md §3): training
    evaluations (``train_evals``) under ``evaluations`` and ``samples``; under ``total`` the
    evaluations of training and scoring together (``evals_total``), shown beside
    ``train_evals``."""
    runs = r.runs
    done = runs[~runs["diverged"] & ~runs["timed_out"]]
    rows = []
    bud = done[done["method"].isin(r.compared) & done["budget_target"].notna()]
    total = r.cfg["budget"].get("match") == "total" and "evals_total" in bud
    matched = "evals_total" if total else "train_evals"
    for (m, k), g in bud.groupby(["method", "dsgd_k"], sort=False):
        dev = (g[matched] - g["budget_target"]).abs() / g["budget_target"]
        rows.append(
            [label(m), int(k), f"{int(g['budget_target'].iloc[0]):,}", _span(g, "train_evals")]
            + ([_span(g, "evals_total")] if total else [])
            + [
                f"{100 * dev.max():.2f}%",
                _span(g, "features_sampled"),
                int(g["shrinks"].sum()),
            ]
        )
    head = ["learner", "k", "target", "train_evals"] + (["evals_total"] if total else [])
    head += [f"max deviation ({matched})" if total else "max deviation", "features_sampled"]
    what = (
        " The target of the `total` convention counts the evaluations of training and of "
        "scoring the validation and test points together (`evals_total`); the deviation is "
        "of that count."
        if total
        else ""
    )
    L = [
        "## Budgets as counted by the learners",
        "",
        f"Counted inside each learner's loop, over every cell that completed its pass.{what}",
        "",
        md_table(head + ["shrinks (sum)"], rows),
        "",
    ]
    div = runs.groupby("method")["diverged"].sum().astype(int)
    late = runs.groupby("method")["timed_out"].sum().astype(int)
    L.append(
        "Cells that diverged (stopped, skipped by selection) per learner, over all grid points: "
        + ", ".join(f"{label(m)} {div.get(m, 0)}" for m in r.methods)
        + (
            "; timed out: " + ", ".join(f"{label(m)} {late.get(m, 0)}" for m in r.methods)
            if late.sum()
            else ""
        )
        + "."
    )
    return L + [""]
