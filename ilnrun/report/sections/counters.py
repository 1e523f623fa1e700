"""The budgets as the learners counted them, against the target, and the failed cells."""

from __future__ import annotations

from ..data import ReportData, label, md_table


def render(r: ReportData) -> list[str]:
    runs = r.runs
    done = runs[~runs["diverged"] & ~runs["timed_out"]]
    rows = []
    bud = done[done["method"].isin(r.compared) & done["budget_target"].notna()]
    for (m, k), g in bud.groupby(["method", "dsgd_k"], sort=False):
        dev = (g["train_evals"] - g["budget_target"]).abs() / g["budget_target"]
        rows.append(
            [
                label(m),
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
