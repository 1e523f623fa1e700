"""Input checks of the scikit-learn estimators (:mod:`ilnrun.estimators`), kept apart from the
estimator classes so that they outlive a regeneration of those classes.

- :func:`refuse_text`: ``X`` or ``y`` holding text (even numeric text such as ``"1.5"``) is
  refused with a clear ``ValueError`` rather than converted or failing deep inside numpy;
- :func:`check_labels`: labels whose mean or spread overflows a float (``|y|`` near ``1e308``)
  are refused: centring and scaling them would make every prediction NaN;
- :func:`check_eta`: a step size whose square overflows a float (``eta >= ~1e154``) is refused
  before the pass, naming ``eta`` (the learners' arithmetic would raise ``OverflowError``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

ETA_MAX = 1e150  # eta**2 and eta * (a bounded gradient) stay finite below this
# the range of y below which y's scale squared (the online losses in units of y) stays finite
LABEL_SPREAD_MAX = 1e150


def _has_text(a: Any) -> bool:
    arr = np.asarray(a) if not isinstance(a, np.ndarray) else a
    if arr.dtype.kind in "USa":
        return True
    if arr.dtype.kind == "O":
        return any(isinstance(v, (str, bytes)) for v in arr.ravel()[:10_000])
    return False


def refuse_text(X: Any, y: Any = None) -> None:
    """Raise ``ValueError`` when ``X`` or ``y`` holds text."""
    for name, a in (("X", X), ("y", y)):
        if a is None or hasattr(a, "dtypes"):  # a pandas frame: sklearn checks its columns
            continue
        try:
            text = _has_text(a)
        except (ValueError, TypeError):
            continue  # ragged input: left to scikit-learn's own message
        if text:
            raise ValueError(
                f"{name} holds text; convert it to numbers first (e.g. np.asarray({name}, "
                "dtype=float)) so that a typo is not read silently"
            )


def check_labels(y: np.ndarray) -> None:
    """Raise ``ValueError`` when centring or scaling ``y`` overflows a float."""
    with np.errstate(all="ignore"):
        mean = float(np.mean(y))
        spread = float(np.max(y) - np.min(y)) if len(y) else 0.0
    if not (math.isfinite(mean) and math.isfinite(spread)) or spread > LABEL_SPREAD_MAX:
        raise ValueError(
            "y is too large to centre and scale in floating point (its mean or range "
            "overflows, or the squared losses would); rescale y (e.g. divide it by its "
            "largest absolute value)"
        )


def check_eta(eta: float) -> None:
    """Raise ``ValueError`` for a step size whose arithmetic overflows a float."""
    if float(eta) > ETA_MAX:
        raise ValueError(
            f"eta={float(eta):.3g} is beyond {ETA_MAX:.0e}: its square overflows a float; "
            "use a smaller eta"
        )
