"""The headline: one line per claim checked, collapsed over budgets, then theory findings."""

from __future__ import annotations

from ..data import COMPARISONS, ReportData, label
from .theory import slope_sentence


def render(r: ReportData) -> list[str]:
    L = ["## Headline", ""]
    for metric, by, what in COMPARISONS:
        rows = r.verdict_rows(metric, by)
        for subject in r.proposed:
            for other in r.compared:
                by_verdict: dict[str, list] = {}
                for s, o, k, _, v in rows:
                    if s == subject and o == other:
                        by_verdict.setdefault(v, []).append(k)
                if by_verdict:
                    parts = "; ".join(
                        f"**{v}** at k = {', '.join(str(k) for k in ks)}"
                        for v, ks in by_verdict.items()
                    )
                    L.append(
                        f"- {label(subject)} reaches a lower {what} than {label(other)}: {parts}."
                    )
    if r.xa == "T":
        for m, setting, g in r.regret_groups():
            if m in r.proposed:
                L.append(f"- {label(m)} ({setting}): {slope_sentence(g)}")
    if "lemma5_max_ratio" in r.runs and r.runs["lemma5_max_ratio"].notna().any():
        ratio = r.runs["lemma5_max_ratio"].dropna()
        L.append(
            f"- Lemma 5's bound on |α|₁ {'never failed' if (ratio <= 1).all() else 'failed'} "
            f"({len(ratio)} passes checked after every round; largest |α|₁/bound = "
            f"{ratio.max():.3g})."
        )
    L.append("")
    return L
