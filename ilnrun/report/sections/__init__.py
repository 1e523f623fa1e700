"""The sections of a report, in order; each module renders one part from a
:class:`~ilnrun.report.data.ReportData` as Markdown lines (``render(r) -> list[str]``)."""

from . import (
    counters,
    figures,
    header,
    headline,
    m_test,
    predictors,
    rate,
    selected,
    selection,
    setup,
    tables,
    theory,
    verdicts,
)

SECTIONS = (
    header,
    headline,
    setup,
    counters,
    figures,
    tables,
    m_test,
    predictors,
    theory,
    rate,
    selected,
    selection,
    verdicts,
)

__all__ = ["SECTIONS"]
