"""``teacher``: the paper's construction for *any* feature map:
``y(x) = sum_{j in S} c_j k(x_j, x)`` with ``S`` a uniformly random set of ``sparsity`` training
indices, ``c_j ~ N(0, 1)`` and ``k`` the kernel of the experiment's feature map (built from the
training inputs exactly as the runner builds it, so e.g. the ``fourier`` median bandwidth is the
same). For a map without a closed-form kernel (``random_net``) ``k`` is its Monte-Carlo estimate
``k_hat(x_j, x) = (1/n) sum_{i<n} psi(x_j; w_i) psi(x; w_i)`` over ``n = kernel_samples`` fresh
draws (``FeatureMap.kernel_estimate``, in blocks of bounded memory), drawn from the instance's
generator after ``S`` and ``c``; its standard errors are recorded in the data info. Inputs
``x ~ inputs``: ``gaussian`` ``N(0, I_D)``; ``clipped_gaussian`` ``max(N(0, I_D), 0)``; ``sphere``
Gaussian rows scaled to unit norm. Optional label noise: ``noise`` is the ratio
of the noise std to the RMS of the clean training target; it is added to every split *before* the
scaling, so training labels stay in ``[-1, 1]`` and ``noise`` does not depend on the kernel's
scale."""

from __future__ import annotations

import numpy as np

from ..features import build_feature_map
from .base import (
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

INPUTS = ("gaussian", "clipped_gaussian", "sphere")


def draw_inputs(rng: np.random.Generator, kind: str, n: int, D: int) -> np.ndarray:
    """``n`` inputs in ``R^D`` from the named distribution (see the module docstring)."""
    X = rng.standard_normal((n, D))
    if kind == "clipped_gaussian":
        return np.maximum(X, 0.0)
    if kind == "sphere":
        return unit_norm_rows(X)
    if kind == "gaussian":
        return X
    raise ValueError(f"unknown input distribution {kind!r} (one of {', '.join(INPUTS)})")


PARAMS = (
    *synthetic_sizes(20),
    param(
        "sparsity",
        "int",
        10,
        "training points x_j in the target y = sum_j c_j k(x_j, x), c_j ~ N(0, 1) (<= T)",
        min=1,
        label=SPARSITY_LABEL,
    ),
    param(
        "inputs",
        "str",
        "sphere",
        "x ~ N(0, I_D), max(N(0, I_D), 0), or N(0, I_D) scaled to unit norm",
        choices=INPUTS,
    ),
    param(
        "noise",
        "float",
        0.0,
        "label noise std as a fraction of the clean training target's RMS (added to "
        "every split before labels are scaled into [-1, 1])",
        min=0,
    ),
    param(
        "kernel_samples",
        "int",
        100_000,
        "Monte-Carlo draws of the kernel in the target for a feature map without a closed-form "
        "kernel (random_net); unused by a map with one",
        min=2,
        key_omit=100_000,
        label="kernel samples",
        since="0.2.0",
    ),
)


@declared(PARAMS)
def teacher(
    rng: np.random.Generator,
    *,
    D: int,
    T: int,
    n_val: int,
    n_test: int,
    sparsity: int,
    inputs: str,
    noise: float,
    kernel_samples: int,
    feature_map: dict | None = None,
) -> Dataset:
    """``y(x) = sum_{j in S} c_j k(x_j, x)`` with ``k`` the kernel of ``feature_map`` (a resolved
    ``feature_map`` config section), or its Monte-Carlo estimate over ``kernel_samples`` draws
    for a map without a closed form; see the module docstring for every choice."""
    if feature_map is None:
        raise ValueError("the teacher dataset needs the experiment's feature_map section")
    n = T + n_val + n_test
    X = np.ascontiguousarray(draw_inputs(rng, inputs, n, D))
    support = rng.choice(T, size=sparsity, replace=False)
    c = rng.standard_normal(sparsity)
    fmap = build_feature_map(feature_map, X[:T])
    estimated: dict = {}
    if fmap.has_kernel:
        y = fmap.kernel(X, X[support]) @ c
    else:
        K, stderr = fmap.kernel_estimate(X, X[support], kernel_samples, rng)
        y = K @ c
        # |y - y_exact| <= sum_j |c_j| |k_hat - k| entry-wise: its standard-error bound
        bound = stderr @ np.abs(c)
        estimated = {
            "kernel_samples": int(kernel_samples),
            "kernel_stderr_max": float(stderr.max()),
        }
    noise_std = 0.0
    if noise > 0:
        noise_std = float(noise * np.sqrt(np.mean(y[:T] ** 2)))
        y = y + noise_std * rng.standard_normal(n)
    y, label_scale = scale_labels(y, T)
    if estimated:  # the target's Monte-Carlo error, in the scaled labels' units
        estimated["target_stderr_bound_max"] = float(bound.max() * label_scale)
        estimated["target_stderr_bound_rms"] = float(np.sqrt(np.mean(bound**2)) * label_scale)
    info = {
        "label_scale": label_scale,
        "support": support.tolist(),
        "coefficients": c.tolist(),
        "noise_std_unscaled": noise_std,
        "feature_map": fmap.describe(),
        "kernel": "monte_carlo" if estimated else "closed_form",
        **estimated,
    }
    return splits(X, y, T, n_val, info)


SPEC = DatasetSpec(
    name="teacher",
    build=teacher,
    summary="a target in the RKHS of the experiment's own feature map (its kernel, or a "
    "Monte-Carlo estimate of it)",
    needs_kernel=True,
    estimated_kernel=True,
    example=lambda folder: {"D": 4, "T": 20, "n_val": 10, "n_test": 15, "sparsity": 3},
    params=PARAMS,
    check=check_sparsity,
    choices=(
        "Target in the RKHS of the experiment's own feature map (the paper's "
        "construction, generalized): `y(x) = Σ_{j∈S} c_j k(x_j, x)` with `S` a uniformly "
        "random subset of `sparsity` training indices, `c_j ~ N(0, 1)` and `k` the "
        "closed-form kernel of the configured feature map (built from the training "
        "inputs, as the learners' map is); for a map without one (`random_net`), its "
        "Monte-Carlo estimate over `kernel_samples` draws (default 100 000; the target's "
        "standard-error bound is in the data info).",
        "Inputs (`inputs`): `gaussian` `N(0, I_D)`; `clipped_gaussian` `max(N(0, I_D), "
        "0)`; `sphere` `N(0, I_D)` rows scaled to unit norm, so `k(x, x) = 1` for the "
        "`relu` and `fourier` kernels. The ReLU features are nonetheless **not** bounded "
        "by 1 as the paper's analysis assumes: on the sphere `w·x ~ N(0, 1)`, so "
        "`ψ = √2 max(0, w·x)` exceeds 1 with probability ≈ 0.24 and is unbounded; only "
        "its second moment is 1.",
        "Label noise (`noise`): Gaussian, std = `noise` × RMS of the clean training "
        "target, added to every split before scaling (0 = noiseless, the default).",
        SCALE_CHOICE,
        SHARED_SPLITS,
    ),
)
