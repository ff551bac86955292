"""Fixtures of the conformance suite: every registered backend x every workload, written once.

A backend that cannot run here (framework not installed, lowering not written) is skipped with
its reason, never failed. Run one backend's suite with ``pytest tests/conformance -k torch``.

**One model per (backend, workload, dtype).** Building a model (ResNet-50 above all) costs more
than most checks that read it, so the checks share one build through :func:`models`, a
session-wide cache: a check that needs the canonical weights loads them with ``set_params``
first (which, by the contract, also resets the optimiser state), so the order the checks run in
does not matter. A check that needs another runtime (one thread, another precision) or a model
that must fail to build still calls ``make`` itself. Under ``pytest -n`` every backend's checks
go to one worker (``tests/conftest.py`` groups them), so a model is built once per run.
"""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.codegen import op_table
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.graph import walk

WORKLOADS = ("cnn", "gru", "resnet50", "transformer")
DTYPES = ("float32", "float64")
RESNET_SIZE = 64  # quick suite: ResNet-50 on 64x64 inputs (same parameters; 224 is marked slow)


@pytest.fixture(params=backends.names())
def backend(request):
    """The backend module, or a skip with the reason it cannot run here."""
    st = backends.status(request.param)
    if not st.usable:
        pytest.skip(f"{request.param}: {st.reason}")
    return backends.load(request.param)


def conformance_workload(name: str):
    """A workload as the suite runs it: ResNet-50 at the quick suite's input size."""
    w = get_workload(name)
    return w.at_image_size(RESNET_SIZE) if w.name == "resnet50" else w


@pytest.fixture(params=WORKLOADS)
def workload(request):
    """A workload, ResNet-50 at the quick suite's input size."""
    return conformance_workload(request.param)


@pytest.fixture(params=DTYPES)
def dtype(request):
    return request.param


def _process_state() -> tuple:
    """What a model built in this process depends on beyond its own objects: TensorFlow's eager
    context, which a build with another thread count replaces (``tensorflow/runtime.py``
    ``set_threads``: its pools are fixed once started), leaving every earlier TensorFlow model
    computing with dead handles. A cached model built under another state is built again."""
    import sys

    context = sys.modules.get("tensorflow.python.eager.context")
    return (id(context.context()) if context is not None else None,)


def require_lowering(backend, workload) -> None:
    """Skip (with the op) where ``backend``'s op table has no entry for an op of ``workload``:
    a backend that has not lowered a newer workload yet (issue 29's transformer on a backend
    added beside it). Decided from the table alone, so a backend whose table holds every op
    and still fails to build fails."""
    entries = op_table(backend.NAME).entries
    for op, _, _ in walk(workload.graph, workload.input.shape):
        if type(op) not in entries:
            pytest.skip(f"{backend.NAME}: no lowering of op {op.OP} ({workload.name}) yet")


class ModelCache:
    """Models built once per (backend, workload, input size, dtype) and handed out holding the
    canonical weights of seed 0 (``set_params`` on every hand-out)."""

    def __init__(self) -> None:
        self._built: dict[tuple, tuple[tuple, object]] = {}
        self.builds = 0

    def __call__(self, backend, workload, dtype: str = "float32"):
        require_lowering(backend, workload)
        key = (backend.NAME, workload.name, workload.input.shape, dtype)
        params = weights(workload)
        state, model = self._built.get(key, (None, None))
        if model is None or state != _process_state():
            model = make(backend, workload, params, dtype=dtype)
            self._built[key] = (_process_state(), model)
            self.builds += 1
        else:
            model.set_params(params)
        return model


@pytest.fixture(scope="session")
def models() -> ModelCache:
    """The suite's one model per (backend, workload, dtype); see the module docstring."""
    return ModelCache()


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


_WEIGHTS: dict[tuple, dict] = {}


def weights(workload, seed: int = 0):
    """The canonical weights every backend starts from (float32, as the runner uses them): made
    once per (workload, input size, seed), handed out as a fresh copy (a check may change them)."""
    key = (workload.name, workload.input.shape, seed)
    if key not in _WEIGHTS:
        _WEIGHTS[key] = canonical_weights(workload, seed)
    return {k: v.copy() for k, v in _WEIGHTS[key].items()}
