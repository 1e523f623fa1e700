"""The figures of the results directory (of a packed one: drawn by the report,
:attr:`ReportData.figure_dir`), copied next to the report."""

from __future__ import annotations

from ...results import copy_atomic
from ..data import ReportData

FIGURES = ("figure1", "budget_sweep", "regret", "curves")


def render(r: ReportData) -> list[str]:
    names = []
    for stem in FIGURES:
        src = r.figure_dir / f"{stem}.png"
        if src.is_file() and not src.is_symlink():  # never a directory, never through a link
            if src.resolve() != (r.out_dir / src.name).resolve():
                copy_atomic(src, r.out_dir / src.name)
            names.append(src.name)
    if not names:
        return []
    return ["## Figures", ""] + [f"![{n}]({n})" for n in names] + [""]
