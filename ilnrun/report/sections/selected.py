"""The hyperparameter setting selected on validation loss, per learner and budget."""

from __future__ import annotations

from ..data import ReportData, label, md_table

NO_PARAMS = "(no parameters)"


def edge_text(r: ReportData, m: str, k: int | None) -> str:
    """The grid-edge flags of a learner and budget, each with the x values where it was
    selected when the experiment has an x axis (per T in a T sweep), and the config's reason
    why that edge is acceptable where it gives one (``methods.<m>.edges_ok``)."""
    parts = []
    ok = r.edges_ok(m)
    for e in r.grid_edges(m, k):
        where = ""
        if r.xa and e.xs:
            values = ", ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in e.xs)
            where = f" at {r.xa} = {values}"
        reason = f" (accepted by the config's `edges_ok`: {ok[e.param]})" if e.param in ok else ""
        parts.append(e.flag + where + reason)
    return "; ".join(parts) or "—"


def render(r: ReportData) -> list[str]:
    rows = []
    for m in r.methods:
        for k in r.ks if r.budgeted(m) else [None]:
            s = r.summary[r.summary["method"] == m]
            s = s[s["dsgd_k"] == k] if k is not None else s
            # a learner without parameters has the empty setting (read back from CSV as NaN);
            # a group with nothing selected has n = 0
            chosen = (
                s.loc[s["n"].fillna(0) > 0, "setting"]
                .astype(object)
                .fillna("")
                .replace("", NO_PARAMS)
            )
            counts = chosen.value_counts()
            rows.append(
                [
                    label(m),
                    k if k is not None else "—",
                    "; ".join(f"{st} (×{c})" for st, c in counts.items()) or "none (all diverged)",
                    edge_text(r, m, k),
                ]
            )
    return [
        "## Selected hyperparameters",
        "",
        "A value at the smallest or largest point of a grid of three or more values is flagged: "
        "the best value may lie outside the grid; with an x axis, at which of its values "
        "(per T in a T sweep).",
        "",
        md_table(
            ["learner", "k", "selected setting (× dataset settings)", "at the edge of its grid"],
            rows,
        ),
        "",
    ]
