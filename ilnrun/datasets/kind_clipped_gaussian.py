"""``clipped_gaussian`` (ILN paper Section 6): ``x = max(N(0, I_D), 0)``; the target weight
vector is a random sparse combination of training points ``a = sum_{j in S} c_j x_j`` with
``|S| = sparsity`` and ``c_j ~ N(0, 1)`` (so the target lies in the RKHS of the coordinate
kernel); ``y = X a``; labels scaled by ``1 / max |y_train|`` (or to an RKHS norm)."""

from __future__ import annotations

import numpy as np

from .base import (
    NOISE_CHOICE,
    SCALE_CHOICE,
    SHARED_SPLITS,
    SPARSITY_LABEL,
    Dataset,
    DatasetSpec,
    check_sparsity,
    declared,
    param,
    scale_labels,
    splits,
    synthetic_sizes,
    unit_norm_rows,
)

PARAMS = (
    *synthetic_sizes(600),
    param(
        "sparsity",
        "int",
        10,
        "training points in the target's expansion (<= T)",
        min=1,
        label=SPARSITY_LABEL,
    ),
    param(
        "normalize_rows",
        "bool",
        False,
        "scale every x to unit norm",
        label="rows normalized to unit norm",
    ),
    param(
        "center",
        "bool",
        False,
        "subtract the training-label mean from every split before scaling (false: "
        "the paper's literal setting)",
        key_omit=False,
        label="labels centred",
    ),
    param(
        "rkhs_norm",
        "float",
        None,
        "scale the target to this norm in the RKHS of k(x, x') = x.x'/D instead "
        "of scaling labels into [-1, 1] (Theorem 1: choose <= B)",
        min=0,
        min_exclusive=True,
        special=(None,),
        key_omit=None,
        label="target RKHS norm",
    ),
    param(
        "target_seed",
        "int",
        None,
        "draw the target from its own generator seeded by this value: the same target for "
        "every T and repetition (its sparsity points are fresh inputs, not training points)",
        min=0,
        special=(None,),
        key_omit=None,
        label="target seed",
        since="0.2.0",
    ),
    param(
        "noise",
        "float",
        0.0,
        "std sigma of Gaussian label noise added to the training and validation labels (in the "
        "units of the final labels); test labels stay clean, so a test loss is the excess risk "
        "over the target exactly (the Bayes risk sigma^2/2 is not in it)",
        min=0,
        key_omit=0.0,
        label="label noise sigma (train and validation)",
        since="0.2.0",
    ),
)


@declared(PARAMS)
def clipped_gaussian(
    rng: np.random.Generator,
    *,
    D: int,
    T: int,
    n_val: int,
    n_test: int,
    sparsity: int,
    normalize_rows: bool,
    center: bool,
    rkhs_norm: float | None,
    target_seed: int | None,
    noise: float,
) -> Dataset:
    """The paper's Figure 1 data; see the module docstring for every choice.

    ``center``: subtract the training-label mean from every split before the labels are scaled
    (the learners have no bias term; see the module docstring). ``rkhs_norm``: instead of the
    max-label scaling, scale the target ``f*(x) = a·x`` so that its norm in the RKHS of
    ``k(x, x') = x·x'/D`` is ``rkhs_norm``: ``‖f*‖_H = √D ‖a‖`` (``f* = D Σ_j c_j k(x_j, ·)``),
    so that Theorem 1's comparator ball of radius ``B ≥ rkhs_norm`` contains the target. Then
    ``|y| ≤ rkhs_norm · √k(x, x)`` (Cauchy–Schwarz) and ``info`` records the norm and
    ``max |y_train|`` (Lemma 5 assumes ``|y_t| ≤ 1``). ``target_seed``: the target is
    ``a = Σ_j c_j z_j`` with ``sparsity`` fresh inputs ``z_j`` and ``c_j ~ N(0, 1)`` drawn from
    ``default_rng(target_seed)`` — one fixed target (one distribution of ``(x, y)``) for every
    ``T`` and repetition, which only the inputs vary; without it the target is drawn per
    instance from training points. ``noise``: ``y_i + sigma xi_i`` with ``xi_i ~ N(0, 1)`` on
    the training and validation rows only, drawn after every other draw (``noise = 0`` draws
    nothing, so the instance is the noise-free one); the test labels are the clean ``f*(x)``.
    For the square loss ``E ½(f(x) - y)² = ½ E (f(x) - f*(x))² + σ²/2``, so the Bayes predictor
    is ``f*``, the Bayes risk is ``σ²/2`` and a predictor's excess risk
    ``½ E (f(x) - f*(x))²`` is its test loss on clean labels exactly (no noise term to
    subtract); with ``rkhs_norm <= B`` ``f*`` is also the best predictor in the ball."""
    n = T + n_val + n_test
    X = rng.standard_normal((n, D))
    np.maximum(X, 0.0, out=X)  # (in place: the same numbers, no second n x D array)
    if normalize_rows:
        X = unit_norm_rows(X)
    if target_seed is None:
        support = rng.choice(T, size=sparsity, replace=False)
        c = rng.standard_normal(sparsity)
        a = c @ X[support]
        info: dict = {"support": support.tolist()}
    else:
        trng = np.random.default_rng(target_seed)
        Z = np.maximum(trng.standard_normal((sparsity, D)), 0.0)
        if normalize_rows:
            Z = unit_norm_rows(Z)
        a = trng.standard_normal(sparsity) @ Z
        info = {"target_seed": target_seed}
    y = X @ a
    if rkhs_norm is not None:
        norm = float(np.sqrt(D) * np.linalg.norm(a))
        factor = rkhs_norm / norm if norm > 0 else 1.0
        y = y * factor
        info.update(target_rkhs_norm=norm * factor if norm > 0 else 0.0, label_scale=factor)
    if center:
        info["train_label_mean"] = float(y[:T].mean())
        y = y - y[:T].mean()
    if rkhs_norm is None:
        y, info["label_scale"] = scale_labels(y, T)
    if noise > 0:
        y = y.copy()
        y[: T + n_val] += noise * rng.standard_normal(T + n_val)
        info["noise"] = noise
    info["max_abs_y_train"] = float(np.max(np.abs(y[:T])))
    X = np.ascontiguousarray(X)
    return splits(X, y, T, n_val, info)


SPEC = DatasetSpec(
    name="clipped_gaussian",
    build=clipped_gaussian,
    summary="the paper's Figure 1 data: clipped-Gaussian inputs, target in the RKHS of "
    "the coordinate kernel",
    example=lambda folder: {"D": 12, "T": 20, "n_val": 10, "n_test": 15, "sparsity": 3},
    params=PARAMS,
    check=check_sparsity,
    clean_test=True,
    choices=(
        "Inputs `x = max(N(0, I_D), 0)`: standard Gaussian with negative values clipped "
        "to 0 (paper Section 6).",
        "Target: `a = Σ_{j∈S} c_j x_j` with `S` a uniformly random subset of `sparsity` "
        "training indices and `c_j ~ N(0, 1)`; labels `y = X a` (no noise). The paper "
        "says only 'a random sparse linear combination of the training points'.",
        SCALE_CHOICE + " The paper does not say how labels are scaled.",
        "Rows are not normalized unless `normalize_rows: true`.",
        "Labels are not centred unless `center: true` (the paper's literal setting). "
        "With `center: true` the training-label mean is subtracted from every split "
        "before the scaling, so the zero predictor is the mean predictor. Centring was "
        "chosen over a bias term because it changes no learner (a bias would add an "
        "unbudgeted, non-kernel coordinate to all four algorithms and to Theorem 1's "
        "analysis); the price is that the centred target `a·x − ȳ` is no longer exactly "
        "in the RKHS of `x·x'/D` (the constant is only approximated by `a·x` on "
        "non-negative inputs).",
        "With `rkhs_norm` set, the target is scaled to that norm in the RKHS of "
        "`k(x, x') = x·x'/D` (`‖a·x‖_H = √D ‖a‖`) instead of the max-label scaling, so a "
        "comparator ball of radius `B ≥ rkhs_norm` contains it (Theorem 1); labels then "
        "satisfy `|y| ≤ rkhs_norm · √k(x, x)`.",
        "With `target_seed` set, the target `a = Σ_j c_j z_j` is drawn from its own "
        "generator (`sparsity` fresh clipped-Gaussian points `z_j`, `c_j ~ N(0, 1)`): one "
        "fixed target for every `T` and repetition, so that losses at different `T` are "
        "about one distribution (a rate in `T`); only the inputs are drawn per instance.",
        NOISE_CHOICE + ", Gaussian noise of std σ is added to the training and "
        "validation labels (after the scaling, in the labels' final units, drawn after every "
        "other draw); the test labels stay the clean `y = X a`, so a test loss is exactly the "
        "excess risk over the Bayes predictor (the target; its risk on noisy labels is σ²/2) "
        "on the test points.",
        SHARED_SPLITS,
    ),
)
