"""What the PyTorch benchmarks share: the issue's batches, the build under a runtime, sync,
machine load."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from rosetta.backends import make
from rosetta.backends import torch as torch_backend
from rosetta.runner.data import feature_images
from rosetta.spec import get_workload
from rosetta.spec.workload import Workload

#: the issue's step sizes: cnn train at 64, gru train at 64 x 150, resnet50 features at 32 x 224^2
BATCH = {"cnn": 64, "gru": 64, "resnet50": 32, "transformer": 64}


def build(w: Workload, params, device: str, threads: int | None, **options):
    """The torch backend configured for this process (``threads``: all usable cores when None)
    and ``w`` built on it; ``options`` are the backend's own (``compile``, ``layout``)."""
    return make(torch_backend, w, params, device=device, threads=threads or None, **options)


def workload_batch(name: str, seed: int = 0) -> tuple[Workload, np.ndarray, np.ndarray | None]:
    """The workload and one canonical batch of the issue's size (random, fixed seed)."""
    w = get_workload(name)
    n = BATCH[name]
    rng = np.random.default_rng(seed)
    if name == "resnet50":
        return w, feature_images(w, 0, n), None
    if w.input.dtype == "int32":
        x = rng.integers(1, 30000, size=(n, *w.input.shape)).astype(np.int32)
    else:
        x = rng.random((n, *w.input.shape), dtype=np.float32)
    y = rng.integers(0, w.output_shape[0], size=n).astype(np.int64)
    return w, x, y


def sync_for(device: str) -> Callable[[object], None]:
    """The ``sync`` for ``common.interleaved``: CUDA synchronise, nothing on the CPU."""
    if device != "cuda":
        return lambda v: None
    import torch

    return lambda v: torch.cuda.synchronize()


def load_avg() -> list[float]:
    """The 1/5/15-minute load averages, rounded."""
    return [round(v, 2) for v in os.getloadavg()]
