"""Fixtures of the conformance suite: every registered backend x every workload, written once.

A backend that cannot run here (framework not installed, lowering not written) is skipped with
its reason, never failed. Run one backend's suite with ``pytest tests/conformance -k torch``.
"""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.spec import canonical_weights, get_workload

WORKLOADS = ("cnn", "gru", "resnet50")
DTYPES = ("float32", "float64")
RESNET_SIZE = 64  # quick suite: ResNet-50 on 64x64 inputs (same parameters; 224 is marked slow)


@pytest.fixture(params=backends.names())
def backend(request):
    """The backend module, or a skip with the reason it cannot run here."""
    st = backends.status(request.param)
    if not st.usable:
        pytest.skip(f"{request.param}: {st.reason}")
    return backends.load(request.param)


@pytest.fixture(params=WORKLOADS)
def workload(request):
    """A workload, ResNet-50 at the quick suite's input size."""
    w = get_workload(request.param)
    return w.at_image_size(RESNET_SIZE) if w.name == "resnet50" else w


@pytest.fixture(params=DTYPES)
def dtype(request):
    return request.param


def gate_batch(workload, n: int = 4, seed: int = 0):
    """A small fixed batch in canonical layout: images in [0, 1), or pre-padded token ids."""
    rng = np.random.default_rng(seed)
    if workload.input.dtype == "int32":
        (t,) = workload.input.shape
        x = np.zeros((n, t), dtype=np.int32)
        for i in range(n):
            length = int(rng.integers(t // 4, t + 1))
            x[i, t - length :] = rng.integers(1, 30000, size=length)
        x[:, t - 1] = rng.integers(3, 30000, size=n)  # every review ends in a word
    else:
        x = rng.random((n, *workload.input.shape), dtype=np.float32)
    y = None
    if workload.task == "train":
        y = rng.integers(0, workload.output_shape[0], size=n).astype(np.int64)
    return x, y


def weights(workload, seed: int = 0):
    """The canonical weights every backend starts from (float32, as the runner uses them)."""
    return canonical_weights(workload, seed)
