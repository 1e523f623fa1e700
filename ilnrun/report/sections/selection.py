"""Selection with and without the kernel (docs/protocol.md §5.2): a learner with an Algorithm-2
validation loss (Shrinking Gradient) selected both ways, side by side — on the exact validation
loss (with the kernel) and on ``val_loss_estimated`` (what a user without the kernel can do)."""

from __future__ import annotations

import math

from ...learners import LEARNERS
from ..data import ReportData, fmt, label, md_table

NOTE = (
    "Each learner that has an Algorithm-2 validation loss (`val_loss_estimated`: its predictor "
    "evaluated by Algorithm 2 with `m_test` samples a point, on the first `n_test_estimated` "
    "validation points) is selected two ways: on the exact validation loss (`val_loss`, with "
    "the kernel) and on `val_loss_estimated` (what a user without the kernel can compute). "
    "Both columns give the selected setting's test NMSE exactly and by Algorithm 2 "
    "(`test_nmse_estimated`, on the first `n_test_estimated` test points), {spread}."
)


def selection_sentence(r: ReportData) -> str:
    """Which selection the report's tables, figures and verdicts use (every report says it)."""
    modes = r.select_modes()
    est = [m for m in r.methods if modes.get(m) == "estimated"]
    have = [m for m in r.methods if LEARNERS[m].estimated_validation]
    if est:
        return (
            "Settings are selected on the exact validation loss, except "
            + ", ".join(label(m) for m in est)
            + ": on its Algorithm-2 validation loss `val_loss_estimated` "
            "(`evaluation.select_on: estimated`, without the kernel)."
        )
    tail = (
        f" ({', '.join(label(m) for m in have)}: on the kernel-evaluated `val_loss`; "
        "`evaluation.select_on: estimated` selects without the kernel)"
        if have
        else ""
    )
    return "Settings are selected on the exact validation loss" + tail + "."


def _cell(s, mode: str, metric: str) -> str:
    mean, ci = s.get(f"sel_{mode}_{metric}_mean"), s.get(f"sel_{mode}_{metric}_ci95")
    return fmt(mean, ci)


def render(r: ReportData) -> list[str]:
    have = [m for m in r.methods if LEARNERS[m].estimated_validation]
    if not have:
        return []
    L = ["## Selection with and without the kernel", "", selection_sentence(r), ""]
    if "sel_estimated_setting" not in r.summary:
        return L + [
            "These results carry no Algorithm-2 validation loss (`val_loss_estimated`, "
            "written since ilnrun 0.2.0): rerun with `--fresh` to select without the kernel.",
            "",
        ]
    rows = []
    modes = r.select_modes()
    for m in have:
        for k in r.ks if r.budgeted(m) else [None]:
            for x in r.xs:
                s = r.summary_rows(m, k, x)
                if not len(s):
                    continue
                s = s.iloc[0].to_dict()
                row = [label(m)]
                row += [k if k is not None else "—"] if r.ks else []
                row += [x] if r.xa else []
                for mode in ("exact", "estimated"):
                    setting = s.get(f"sel_{mode}_setting")
                    ok = isinstance(setting, str) and not (
                        isinstance(setting, float) and math.isnan(setting)
                    )
                    used = " (used)" if modes.get(m, "exact") == mode else ""
                    row += [
                        (setting + used) if ok else "none (all diverged)",
                        _cell(s, mode, "test_nmse"),
                        _cell(s, mode, "test_nmse_estimated"),
                    ]
                rows.append(row)
    head = ["learner"] + (["k"] if r.ks else []) + ([r.xa] if r.xa else [])
    head += [
        "selected on exact val loss",
        "test NMSE",
        "test NMSE (Alg. 2)",
        "selected on Alg.-2 val loss",
        "test NMSE",
        "test NMSE (Alg. 2)",
    ]
    spread = "mean ± 95% interval over repetitions" if r.tested else "of the one repetition"
    return L + [NOTE.format(spread=spread), "", md_table(head, rows), ""]
