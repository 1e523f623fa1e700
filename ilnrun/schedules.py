"""Step-size schedules ``eta_t`` for rounds ``t = 1..T`` (docs/algorithms.md §5).

- ``constant``: ``eta_t = eta``
- ``inv_sqrt``: ``eta_t = eta / sqrt(t)``
- ``inv``:      ``eta_t = eta / (1 + decay * t)`` (the form of Dai et al.'s released code; their
  analysis asks for ``O(1/t)``)
- ``inv_t``:    ``eta_t = eta / t`` (Dai et al. Theorems 4-5: ``gamma_t = theta / t`` with
  ``theta = eta``)
"""

from __future__ import annotations

import numpy as np

SCHEDULES = ("constant", "inv_sqrt", "inv", "inv_t")


def step_sizes(schedule: str, eta: float, T: int, decay: float | None = None) -> np.ndarray:
    """Return ``eta_t`` for ``t = 1..T`` as an array of length ``T``."""
    t = np.arange(1, T + 1, dtype=float)
    if schedule == "constant":
        return np.full(T, float(eta))
    if schedule == "inv_sqrt":
        return eta / np.sqrt(t)
    if schedule == "inv":
        return eta / (1.0 + float(1.0 if decay is None else decay) * t)
    if schedule == "inv_t":
        return eta / t
    raise ValueError(f"unknown schedule {schedule!r}; expected one of {SCHEDULES}")
