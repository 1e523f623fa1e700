"""Importing and configuring JAX for the jax engine: float64 and the persistent compilation
cache.

- float64: ``jax_enable_x64`` is switched on for the process (every engine number is a float64,
  as in numpy).
- Compilation cache: compiled programs are kept in ``$ILNRUN_JAX_CACHE`` (default
  ``$XDG_CACHE_HOME/ilnrun/jax``, i.e. ``~/.cache/ilnrun/jax``), so a second run of a config
  compiles nothing. Nothing else is written outside the results directory.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "ILNRUN_JAX_CACHE"


class JaxMissing(RuntimeError):
    """``--engine jax`` without jax installed."""


def cache_dir() -> Path:
    """Where compiled programs are cached (``$ILNRUN_JAX_CACHE`` or ``~/.cache/ilnrun/jax``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ilnrun" / "jax"


def setup():
    """Import jax, enable float64 and the persistent compilation cache; return the module."""
    try:
        import jax
    except ImportError as exc:
        raise JaxMissing(
            "the jax engine needs JAX: pip install 'ilnrun[jax]' (CPU) or 'ilnrun[gpu]' "
            "(CUDA 12), or run with --engine numpy"
        ) from exc
    jax.config.update("jax_enable_x64", True)
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except OSError:  # an unwritable cache directory only costs compilations
        pass
    return jax


def device() -> str:
    """The device the jax engine runs on, in words (e.g. ``cpu (TFRT_CPU_0)``, ``gpu (NVIDIA
    H100 80GB HBM3)``)."""
    jax = setup()
    d = jax.devices()[0]
    kind = getattr(d, "device_kind", str(d))
    return f"{jax.default_backend()} ({kind}, {len(jax.devices())} device(s))"
