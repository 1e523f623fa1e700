"""The protocol of the headline lines of reports written before they named it.

Every report generated before ``ilnrun report`` wrote :data:`~ilnrun.report.data.PROTOCOL_MARK`
came from an exact run (``evaluation.kernel`` did not exist) whose proposed learner was selected
on its kernel-evaluated validation loss (``evaluation.select_on: exact``, the only choice before
it existed and the one every such committed report states) and evaluated with the closed-form
kernel; its "with Algorithm-2 test estimates (no kernel)" parts are the same settings scored by
Algorithm 2 at test time; the comparison on each learner's best online setting uses no kernel
(online losses are each learner's own predictions: Algorithm-2 estimates for Shrinking
Gradient); gaps to a batch fit, the rate claim and the regret slopes use exact evaluations.
:func:`worded` says so in each headline line ``ilnrun index`` copies from such a report,
without changing the report itself (a generated file, regenerated only from its results).
"""

from __future__ import annotations

import re

from ..learners import LEARNERS
from .data import FREE, KERNEL, MODE_TITLE

WITH, WITHOUT = MODE_TITLE[KERNEL], MODE_TITLE[FREE]

# (pattern, replacement) on one headline line, in order
REWRITES: tuple[tuple[re.Pattern, str], ...] = (
    (
        re.compile(r"^- (.+?) reaches a lower test loss \(settings selected on validation loss\) "),
        rf"- \1, selected and evaluated {WITH}, reaches a lower test loss ",
    ),
    (
        re.compile(r"^- (.+?) reaches a lower online loss \(same settings\) "),
        rf"- \1, selected {WITH}, reaches a lower online loss (same settings) ",
    ),
    (
        re.compile(
            r"^- (.+?) reaches a lower online loss \(each learner's best setting for online "
            r"loss\) "
        ),
        rf"- \1, {WITHOUT} (each learner's best setting for online loss; its online "
        r"predictions are Algorithm-2 estimates), reaches a lower online loss ",
    ),
    (
        re.compile(r"with Algorithm-2 test estimates \(no kernel(\)|; )"),
        rf"{WITHOUT} at test time (Algorithm-2 test estimates, settings selected {WITH}\1",
    ),
    (
        re.compile(r"^- Gap to the batch fit( at k = \d+)? \("),
        rf"- Gap to the batch fit\1, {WITH} (",
    ),
    (
        re.compile(r"^- The rate claim against Doubly SGD \("),
        rf"- The rate claim against Doubly SGD, {WITH} (",
    ),
    (
        re.compile(r"^- (.+?) \(([^()]*)\): Log-log slope of mean regret"),
        rf"- \1 (\2), {WITH} (regret of its predictions evaluated exactly): Log-log slope of "
        "mean regret",
    ),
)
MEAN_LINE = re.compile(r"against the mean predictor \(exact test loss([^)]*)\):")


def worded(line: str) -> str:
    """A headline line of a report written before its lines named their protocol, with the
    protocol of each claim it makes said (module docstring); other lines unchanged."""
    for pattern, replacement in REWRITES:
        line = pattern.sub(replacement, line)
    proposed = [s.label for s in LEARNERS.values() if s.role == "proposed"]
    subjects = ", ".join(p for p in proposed if f": {p}: " in line)
    if subjects:
        line = MEAN_LINE.sub(
            rf"against the mean predictor (exact test loss\1; {subjects} selected and "
            rf"evaluated {WITH}):",
            line,
            count=1,
        )
    return line
