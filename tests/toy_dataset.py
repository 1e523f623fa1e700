"""A toy dataset, written as a new contributor would: one module with its builder and its
``SPEC``, registered in a test with one line (``DATASETS["toy_sine"] = SPEC``).

``x ~ Uniform[-1, 1]^D``; ``y = sin(freq * a . x)`` with ``a ~ N(0, I_D / D)`` drawn once per
repetition; labels scaled by ``1 / max |y_train|`` like every dataset.
"""

from __future__ import annotations

import numpy as np

from ilnrun.datasets import Dataset, DatasetSpec, declared
from ilnrun.datasets.base import param, scale_labels, splits, synthetic_sizes

PARAMS = (
    *synthetic_sizes(4),
    param("freq", "float", 2.0, "frequency of the target", min=0, key_omit=2.0, label="frequency"),
)


@declared(PARAMS)
def toy_sine(
    rng: np.random.Generator, *, D: int, T: int, n_val: int, n_test: int, freq: float
) -> Dataset:
    """One instance: ``T + n_val + n_test`` iid rows, split in that order."""
    n = T + n_val + n_test
    X = rng.uniform(-1.0, 1.0, size=(n, D))
    a = rng.standard_normal(D) / np.sqrt(D)
    y, factor = scale_labels(np.sin(freq * (X @ a)), T)
    return splits(np.ascontiguousarray(X), y, T, n_val, {"label_scale": factor})


SPEC = DatasetSpec(
    name="toy_sine",
    build=toy_sine,
    params=PARAMS,
    summary="a sine of a random projection of uniform inputs (a test's toy dataset)",
    choices=("Inputs `x ~ U[-1, 1]^D`, target `sin(freq · a·x)` with `a ~ N(0, I/D)`.",),
    example=lambda folder: {"D": 3, "T": 20, "n_val": 10, "n_test": 15},
)
