"""What the learner modules and ``ilnrun validate`` know of the compiled kernels without importing
them: the self-checks the learners register, the switch that turns the kernels off, and whether
they run.

The kernels modules (``shrinking_gradient_kernels``, ``random_feature_kernels``) import numba and
scipy's BLAS, about half a second of a start-up; the learner modules, which the registry imports
for ``ilnrun list`` and ``ilnrun validate`` too, import them only in the functions that run a
pass (docs/architecture.md, "Heavy imports"). This module imports nothing heavy, so that a learner
registers its self-check at import without loading numba, and the kernels, which read the
checks, import no learner (no import circle). It also asks a compiled pass's declaration
whether it implements a setting (:func:`implemented`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from importlib.util import find_spec

from .implements import Implements, refusal

# ``ILNRUN_NO_NUMBA=1`` (any value but empty or 0): the learners run as numpy code
NO_NUMBA_ENV = "ILNRUN_NO_NUMBA"

# Self-checks run once per process and map before the compiled kernels are trusted: each takes
# the compiled map's kind and says whether compiled and numpy code agree bit for bit. The learner
# modules that use the kernels register them here at their import (learners/shrinking_gradient.py
# in SG_CHECKS, for its pass, and SG_ESTIMATE_CHECKS, for the Algorithm-2 test estimates;
# doubly_sgd.py and fixed_random.py in RF_CHECKS, each run only for its own learner); the kernels
# modules read them as their ``PROBES`` (and ``ESTIMATE_PROBES``). A check compiles the kernels
# it checks: each runs where what it checks runs, not before.
SG_CHECKS: list[Callable[[int], bool]] = []  # shrinking_gradient_kernels.PROBES
SG_ESTIMATE_CHECKS: list[Callable[[int], bool]] = []  # shrinking_gradient_kernels.ESTIMATE_PROBES
RF_CHECKS: list[Callable[[int], bool]] = []  # random_feature_kernels.PROBES

_KERNELS = f"{__package__}.shrinking_gradient_kernels"


def switched_off() -> bool:
    """Whether ``ILNRUN_NO_NUMBA`` turns the compiled kernels off."""
    return os.environ.get(NO_NUMBA_ENV, "") not in ("", "0")


def available() -> bool:
    """Whether the compiled kernels run in this process, for the time estimates of the learners'
    ``seconds`` hooks: the kernels' own answer once they are imported (a run imports them before
    its first cell), else whether numba is installed and not switched off, found without
    importing it (``ilnrun validate``; a numba that is installed but fails to import counts as
    running there: the estimate is rough anyway)."""
    if _HELD:
        return _HELD[-1]
    kernels = sys.modules.get(_KERNELS)
    if kernels is not None:
        return kernels.available()
    return not switched_off() and _installed()


_HELD: list[bool] = []  # the answers held by :func:`held`, innermost last


@contextmanager
def held() -> Iterator[bool]:
    """Within it, :func:`available` gives the answer it gave on entering, without asking again
    (reading the environment costs about a microsecond, and the estimates of a config ask it
    once for every learner setting of every dataset setting: ``ilnrun.cost.estimates``)."""
    _HELD.append(available())
    try:
        yield _HELD[-1]
    finally:
        _HELD.pop()


def implemented(
    learner: str, declared: Implements, args: dict, note: Callable[[str], None]
) -> bool:
    """Whether the compiled pass of ``learner`` implements the ``fit`` keywords ``args`` (its
    declaration, ``LearnerSpec.implements["compiled"]``); where it does not, a one-line ``note``
    (the kernels' ``note``: once per process and message): the numpy code runs that setting. A
    learner's ``fit`` asks this before the compiled kernels' own conditions."""
    missing = declared.missing(args)
    if missing:
        for key, value in missing:
            note(
                f"{refusal(learner, 'compiled', declared, key, [value])}: the numpy code runs "
                "these settings (the same numbers, slower)"
            )
    return not missing


@cache
def _installed() -> bool:
    """Whether numba is installed (looked up once: validate asks for every cell)."""
    return find_spec("numba") is not None
