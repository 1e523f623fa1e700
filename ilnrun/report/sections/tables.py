"""Test and online loss of every learner's selected setting (mean ± 95% CI)."""

from __future__ import annotations

from ..data import ReportData, label, md_table


def render(r: ReportData) -> list[str]:
    """One table per budget with a row per x value; with no x axis, one table with a row per
    budget."""
    head = [label(m) for m in r.methods]
    L = []
    for metric, title in (("test_loss", "Test loss"), ("online_loss", "Online loss")):
        L += [f"## {title} (mean ± 95% CI over repetitions, selected settings)", ""]
        if r.xa is None:
            rows = [
                [k if k is not None else "—"] + [r.cell(m, metric, k, None) for m in r.methods]
                for k in r.ks or [None]
            ]
            L += [md_table(["k", *head], rows), ""]
            continue
        for k in r.ks or [None]:
            rows = [[x] + [r.cell(m, metric, k, x) for m in r.methods] for x in r.xs]
            if k is not None:
                L += [f"Budget k = {k}:", ""]
            L += [md_table([r.xa, *head], rows), ""]
    return L
