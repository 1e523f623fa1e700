"""The headline's "Shrinking Gradient against the best competitor" lines (docs/protocol.md §7.3):
per budget and protocol, the competitor with the lowest mean test NMSE at its validation-selected
setting, and the proposed learner's paired test-loss ratio against it; in a classification run
(±1 labels), the competitor with the lowest mean test error rate and the paired difference of
error rates, which share one unit whatever loss each learner learns with (§7.4). Both are read
from the report's verdict tables (the same cells, intervals and Holm-adjusted words: no test is
added)."""

from __future__ import annotations

import math

from ...stats import counted_verdict, difference_word, ratio_word
from ..data import ReportData, label, short
from .verdicts import difference_cell, ratio_cell


def _x_text(r: ReportData, x: object) -> str:
    """``T = 1000`` for an x value, ``''`` without an x axis."""
    if not r.xa or x is None:
        return ""
    return f"{r.xa} = {x:g}" if isinstance(x, float) else f"{r.xa} = {x}"


def _nmse(v: float) -> str:
    return "diverged" if math.isinf(v) else f"{v:.3g}"


def headline_lines(r: ReportData, protocol: dict[str, str]) -> list[str]:
    """One line per (protocol, proposed learner, budget): at each x value the best competitor
    (:meth:`~ilnrun.report.data.ReportData.best_competitor`), both mean test NMSEs and the
    proposed learner's test loss as a multiple of the competitor's (the cell of the test-loss
    verdict table of that protocol: geometric mean of the per-repetition ratios with its 95%
    interval), then the verdict word counted over the x values as the verdict lines count them
    (:func:`ilnrun.stats.counted_verdict` of the Holm-adjusted per-x words; no word with one
    repetition). ``protocol`` words each protocol (``mode`` -> e.g. ``selected and evaluated
    with the closed-form kernel``)."""
    if not r.proposed:
        return []
    if not any(o not in r.proposed for o in r.compared):
        return [
            f"- {label(s)} against the best competitor: none (no other budgeted learner ran)."
            for s in r.proposed
        ]
    if r.classifies:
        return _error_lines(r, protocol)
    family = r.verdict_family()
    L = []
    for mode in protocol:
        cells = {(s, o, k): ps for s, o, k, ps in family.get((mode, "test_loss", None), [])}
        for subject in r.proposed:
            for k in r.ks or [None]:
                found = [(x, i, r.best_competitor(subject, k, x, mode)) for i, x in enumerate(r.xs)]
                found = [(x, i, best) for x, i, best in found if best is not None]
                if not found:
                    continue
                others = {best[0] for _, _, best in found}
                one = len(others) == 1
                ps = [cells[(subject, best[0], k)][i] for _, i, best in found]
                paired = any(p["n"] for p in ps)  # else no cell pairs (e.g. an unbudgeted SG)
                parts, words = [], []
                for (x, _, (other, v)), p in zip(found, ps, strict=True):
                    own = r.mean_nmse(subject, k, x, mode)
                    where = f"{_x_text(r, x)}: " if _x_text(r, x) else ""
                    name = "" if one else f"{label(other)}, "
                    nmse = f"NMSE {_nmse(own)} against {_nmse(v)}"
                    ratio = f"{ratio_cell(p, label(other))} ({nmse})" if paired else nmse
                    parts.append(f"{where}{name}{ratio}")
                    words.append(ratio_word(p, short(subject)))
                several = r.xa and len(found) > 1
                if one:
                    other = label(next(iter(others)))
                    every = f" at every {r.xa}" if several else ""
                    who = f"{other}{every} (the lowest mean test NMSE at its selected setting)"
                    ratio = f"{short(subject)}'s test loss over {other}'s, paired by repetition"
                else:
                    who = f"per {r.xa}, the competitor with the lowest mean test NMSE"
                    ratio = (
                        f"{short(subject)}'s test loss over the competitor's, paired by repetition"
                    )
                ratio += f" (with {short(subject)}'s mean NMSE against the competitor's)"
                if not paired:
                    ratio = (
                        "no repetition pairs the two (as in the verdict tables); "
                        f"{short(subject)}'s mean NMSE against the competitor's"
                    )
                at = f" at k = {k}" if k is not None else ""
                word = f": **{counted_verdict(words, r.xa)}**" if r.tested else ""
                L.append(
                    f"- {label(subject)} against the best competitor{at}, {protocol[mode]}: "
                    f"{who}; {ratio}: {'; '.join(parts)}{word}."
                )
    return L


def _error_lines(r: ReportData, protocol: dict[str, str]) -> list[str]:
    """The lines of a classification run: per proposed learner and budget, in the protocol of
    the test-error verdict (:attr:`~ilnrun.report.data.ReportData.error_mode`), the competitor
    with the lowest mean test error rate (:meth:`~ilnrun.report.data.ReportData.best_competitor`
    by ``test_error``), both mean error rates, and the cell of the test-error verdict table:
    the mean paired difference ``error(proposed) − error(competitor)`` with its 95% interval;
    the verdict word counted over the x values. NMSE is not used: a hinge or logistic learner
    has none, and NMSEs of learners with different losses do not compare."""
    mode = r.error_mode
    if mode not in protocol:
        return []
    table = r.verdict_family().get((mode, "test_error", None), [])
    cells = {(s, o, k): ps for s, o, k, ps in table}
    L = []
    for subject in r.proposed:
        for k in r.ks or [None]:
            found = [
                (x, i, best)
                for i, x in enumerate(r.xs)
                if (best := r.best_competitor(subject, k, x, mode, "test_error")) is not None
                and (subject, best[0], k) in cells
            ]
            if not found:
                continue
            others = {best[0] for _, _, best in found}
            one = len(others) == 1
            parts, words = [], []
            for x, i, (other, v) in found:
                p = cells[(subject, other, k)][i]
                own = r.mean_metric(subject, k, x, mode, "test_error")
                where = f"{_x_text(r, x)}: " if _x_text(r, x) else ""
                name = "" if one else f"{label(other)}, "
                parts.append(
                    f"{where}{name}{difference_cell(p, label(other))} "
                    f"(error rate {own:.3g} against {v:.3g})"
                )
                words.append(difference_word(p, short(subject)))
            several = r.xa and len(found) > 1
            if one:
                other = label(next(iter(others)))
                every = f" at every {r.xa}" if several else ""
                who = f"{other}{every} (the lowest mean test error rate at its selected setting)"
            else:
                who = f"per {r.xa}, the competitor with the lowest mean test error rate"
            at = f" at k = {k}" if k is not None else ""
            word = f": **{counted_verdict(words, r.xa)}**" if r.tested else ""
            L.append(
                f"- {label(subject)} against the best competitor{at}, {protocol[mode]}: {who}; "
                f"{short(subject)}'s test error rate minus the competitor's, paired by repetition "
                f"(with both mean error rates): {'; '.join(parts)}{word}."
            )
    return L
