"""ilnrun: experiment runner for "Learning Infinite Layer Networks Without the Kernel Trick".

``ilnrun.run_experiment`` runs a config from Python (:mod:`ilnrun.api`); ``ilnrun.load`` reads a
results directory back and reproduces any of its cells (:mod:`ilnrun.roundtrip`); the learners as
scikit-learn regressors and classifiers are in :mod:`ilnrun.estimators`. Both are imported on
first use, so ``import ilnrun`` stays cheap and scikit-learn stays optional.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"  # kept equal to pyproject.toml (a test checks)

_LAZY = {
    "run_experiment": "api",
    "Results": "api",
    "load": "roundtrip",
    "LoadError": "roundtrip",
    "ShrinkingGradientRegressor": "estimators",
    "DoublySGDRegressor": "estimators",
    "FixedRandomRegressor": "estimators",
    "KernelOGDRegressor": "estimators",
    "KernelRidgeRegressor": "estimators",
    "NystroemRidgeRegressor": "estimators",
    "ShrinkingGradientClassifier": "estimators",
    "DoublySGDClassifier": "estimators",
    "FixedRandomClassifier": "estimators",
    "KernelOGDClassifier": "estimators",
    "KernelRidgeClassifier": "estimators",
    "NystroemRidgeClassifier": "estimators",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
