"""Keras-on-PyTorch process settings: Keras' engine, and PyTorch's own (the ``torch`` backend's).

Importing this module selects Keras' PyTorch engine for the process
(``keras_common.engine.select``: ``KERAS_BACKEND=torch`` before ``keras`` is imported; where this
process's Keras already runs another engine, one line saying so). Threads, TF32 and the device
name are the ``torch`` backend's (``rosetta/backends/torch/runtime.py``): the same engine, set the
same way, read back from torch.
"""

from __future__ import annotations

from rosetta.backends.keras_common.engine import keep_float64, select
from rosetta.backends.torch import runtime as torch_runtime
from rosetta.backends.torch.runtime import (  # noqa: F401  (the contract's names, torch's own)
    cuda_available,
    device_name,
    interop_threads,
    set_tf32,
    set_threads,
)

keras = select("torch", "keras_torch")
keep_float64()  # float64 models compute in float64 (engine.FLOAT64_NOTE)


def available() -> tuple[bool, str]:
    """Usable once this module imported (torch, and Keras on its PyTorch engine)."""
    return True, ""


def versions() -> dict[str, str]:
    """Keras and torch (with its CUDA/cuDNN where built with them)."""
    return {
        "keras": keras.__version__,
        "keras_engine": keras.backend.backend(),
        **torch_runtime.versions(),
    }


def keras_device(device: str) -> str:
    """The device name Keras' torch engine takes (``keras.device``) for a resolved device."""
    return "cuda:0" if device == "cuda" else "cpu"
