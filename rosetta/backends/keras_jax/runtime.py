"""Keras-on-JAX process settings: Keras' engine, and JAX's own settings (the ``jax`` backend's).

Importing this module selects Keras' JAX engine for the process
(``keras_common.engine.select``: ``KERAS_BACKEND=jax`` before ``keras`` is imported; where this
process's Keras already runs another engine, one line saying so). JAX's platforms, CPU threads,
TF32 and the float64 scope are the ``jax`` backend's (``rosetta/backends/jax/runtime.py``): the
same engine, set the same way, read back from JAX.
"""

from __future__ import annotations

import importlib.metadata

from rosetta.backends.jax import runtime as jax_runtime  # JAX_PLATFORMS first, then jax
from rosetta.backends.jax.runtime import (  # noqa: F401  (the contract's names, JAX's own)
    cuda_available,
    jax_device,
    precision_scope,
    set_tf32,
    set_threads,
    settings,
)
from rosetta.backends.keras_common.engine import keep_float64, select

keras = select("jax", "keras_jax")
keep_float64()  # float64 models compute in float64 (engine.FLOAT64_NOTE)


def available() -> tuple[bool, str]:
    """Usable once this module imported (JAX, and Keras on its JAX engine)."""
    return True, ""


def versions() -> dict[str, str]:
    """Keras and the JAX distributions."""
    out = {"keras": keras.__version__, "keras_engine": keras.backend.backend()}
    out.update(jax_runtime.versions())
    try:
        out["ml_dtypes"] = importlib.metadata.version("ml_dtypes")
    except importlib.metadata.PackageNotFoundError:
        pass
    return out
