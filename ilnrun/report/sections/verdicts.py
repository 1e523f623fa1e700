"""The paper's claim as verdict rows: paired differences of the proposed learner against each
competitor, per budget and x value, collapsed into one word (:mod:`ilnrun.stats`)."""

from __future__ import annotations

from ..data import COMPARISONS, ReportData, fmt, label, md_table, short


def render(r: ReportData) -> list[str]:
    if not r.proposed:
        return []
    subjects = ", ".join(label(m) for m in r.proposed)
    L = [
        "## Verdict on the paper's claim",
        "",
        f"Claim (paper Section 6): at an equal feature budget, {subjects} reaches a lower loss "
        "than the other learners. The paper does not say which loss, so three comparisons are "
        "made: the test loss of the learned predictor (evaluated exactly) with settings selected "
        "on validation loss; the online loss of the single pass with the same settings; and the "
        "online loss with each learner's best setting for online loss (the regret view: best "
        "step size in hindsight). Cells: paired difference (proposed − other; negative = the "
        "proposed learner is better), mean ± 95% CI over repetitions.",
        "",
    ]
    head = ["claim", "k"] + [f"{r.xa}={x}" if r.xa else "all" for x in r.xs]
    for metric, by, what in COMPARISONS:
        rows = [
            [f"{short(s)} < {label(o)}", k if k is not None else "—"]
            + [fmt(p["mean"], p["ci"], 3) for p in ps]
            + [v]
            for s, o, k, ps, v in r.verdict_rows(metric, by)
        ]
        L += [f"**{what[0].upper() + what[1:]}**:", ""]
        L += [md_table([*head, "verdict"], rows), ""]
    return L
