"""``teacher_sign``: binary labels from the ``teacher`` target (:mod:`.kind_teacher`), with
label flips: ``y = sign(f(x) - t)`` (``+1`` where ``f(x) > t``, else ``-1``) for the teacher's
``f(x) = sum_{j in S} c_j k(x_j, x)`` in the RKHS of the experiment's own feature map, drawn by
the teacher's own builder with no noise (same inputs, support, coefficients and kernel: the
``teacher`` instance of the same seed). The threshold ``t`` is the median of ``f`` over the
training inputs (``threshold: median``, the default: balanced classes) or 0 (``zero``: the
sign of ``f`` itself). ``0`` is a poor default: with the ``fourier`` or ``relu`` kernel every
``k(x_j, x)`` is positive and nearly constant in ``x``, so ``sign(f)`` is the sign of
``sum_j c_j`` on nearly every input for many draws (docs/protocol.md §2.10). Then each label
of every split is flipped independently with probability ``flip`` (drawn after the teacher's
draws). Labels are exactly ``±1``; the Bayes classifier is ``sign(f - t)``, with error rate
``flip``. The square loss on these labels is the ILN paper's suggestion for classification
(the remark after its Eq. 6)."""

from __future__ import annotations

import numpy as np

from .base import SHARED_SPLITS, Dataset, DatasetSpec, check_sparsity, declared, param, splits
from .classes import PM1
from .kind_teacher import PARAMS as TEACHER_PARAMS
from .kind_teacher import SPEC as TEACHER
from .kind_teacher import teacher

THRESHOLDS = ("median", "zero")

PARAMS = (
    *(p for p in TEACHER_PARAMS if p.name != "noise"),
    param(
        "threshold",
        "str",
        "median",
        "the label is +1 where f(x) > t: t the median of f over the training inputs "
        "(balanced classes) or zero (the sign of f)",
        choices=THRESHOLDS,
    ),
    param(
        "flip",
        "float",
        0.0,
        "probability that a label is flipped, independently in every split (0 = the sign of "
        "the teacher exactly; 0.5 = labels independent of x)",
        min=0,
        max=0.5,
        label="label flip probability",
    ),
)


@declared(PARAMS)
def teacher_sign(
    rng: np.random.Generator,
    *,
    D: int,
    T: int,
    n_val: int,
    n_test: int,
    sparsity: int,
    inputs: str,
    kernel_samples: int,
    threshold: str,
    flip: float,
    feature_map: dict | None = None,
) -> Dataset:
    """``sign(f - t)`` of the teacher's target ``f`` with label flips; see the module
    docstring."""
    real = teacher(
        rng,
        D=D,
        T=T,
        n_val=n_val,
        n_test=n_test,
        sparsity=sparsity,
        inputs=inputs,
        noise=0.0,
        kernel_samples=kernel_samples,
        feature_map=feature_map,
    )
    X = np.concatenate([real.X_train, real.X_val, real.X_test])
    f = np.concatenate([real.y_train, real.y_val, real.y_test])
    t = float(np.median(f[:T])) if threshold == "median" else 0.0
    y = np.where(f > t, 1.0, -1.0)
    flipped = rng.random(len(y)) < flip if flip > 0 else np.zeros(len(y), dtype=bool)
    y[flipped] *= -1.0
    info = {k: v for k, v in real.info.items() if k != "noise_std_unscaled"}
    info.update(
        label_scale=1.0,
        target_scale=real.info["label_scale"],  # the real-valued teacher's factor
        threshold_value=t,  # in the scaled teacher's units
        flip=float(flip),
        flipped={
            "train": int(flipped[:T].sum()),
            "val": int(flipped[T : T + n_val].sum()),
            "test": int(flipped[T + n_val :].sum()),
        },
        positive_fraction={
            "train": float(np.mean(y[:T] > 0)),
            "val": float(np.mean(y[T : T + n_val] > 0)),
            "test": float(np.mean(y[T + n_val :] > 0)),
        },
    )
    return splits(X, y, T, n_val, info)


def check_teacher_sign(spec: dict) -> None:
    """``sparsity <= T`` (the teacher's support is drawn from the training points)."""
    check_sparsity(spec)


SPEC = DatasetSpec(
    name="teacher_sign",
    build=teacher_sign,
    summary="binary labels: the sign of the teacher's target (the experiment's own kernel), "
    "each label flipped with probability flip",
    needs_kernel=True,
    estimated_kernel=True,
    example=lambda folder: {"D": 4, "T": 40, "n_val": 20, "n_test": 30, "sparsity": 6},
    params=PARAMS,
    choices=(
        "Labels `y = sign(f(x) − t)` (`+1` where `f(x) > t`, else `−1`) of the `teacher` "
        "target `f` (drawn exactly as the `teacher` dataset draws it without noise, same "
        "seed, same instance): " + TEACHER.choices[0],
        "Threshold (`threshold`): `median` (default), the median of `f` over the training "
        "inputs, so the training classes are balanced; `zero`, the sign of `f` itself, which "
        "with a positive kernel (`fourier`, `relu`) is nearly constant: `k(x_j, x)` varies "
        "little with `x`, so `sign(f)` is mostly the sign of `Σ_j c_j`.",
        TEACHER.choices[1],
        "Label flips (`flip`): each label of every split (training, validation and test) is "
        "flipped independently with probability `flip` (0 = none, the default), so the test "
        "error of the Bayes classifier `sign(f − t)` is `flip`.",
        "Labels are exactly `+1` or `-1` (no scaling); the data info records the threshold "
        "and each split's fraction of `+1` labels and number of flips.",
        SHARED_SPLITS,
    ),
    check=check_teacher_sign,
    labels=PM1,
)
