"""Every generating backend's greedy decoding with a KV cache against the float64 reference: the
logits of the prefill and of every decode step (fed the reference's tokens, so one flipped
greedy token cannot hide the steps after it), and in float64 the greedy tokens identical.

Two requests per model: prompts of 16 with 16 new tokens at a batch of 3, then one-token prompts
generating up to the last position of the context (the cache's two edges: the first position
alone, the last slot written). The model is the suite's own (``models``: the one the decoder's
other checks use, so a model that generated must still train for them). Tolerances: each step's
logits are the decoder's forward outputs, held to its forward bounds for the dtype
(``rosetta/models/decoder.yaml``). A backend that does not generate skips, saying so (its cells
record the same); the reference's own cache is checked against its full recompute in
``tests/test_generation.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.runner.generation import gate_generation
from rosetta.spec import get_workload
from tests.conformance.conftest import backend_params, weights

#: the backends gated in the quick tier (their float32); every other one is the slow tier's,
#: beside its decoder conformance at float64
QUICK = ("torch", "jax")


def gate_prompts(n: int, length: int, seed: int = 0) -> np.ndarray:
    """``n`` prompts of ``length`` token ids of the decoder's vocabulary (int32)."""
    return np.random.default_rng(seed).integers(1, 8192, size=(n, length)).astype(np.int32)


@pytest.fixture(scope="module")
def reference():
    """The float64 reference decoder on the suite's canonical weights (one per process)."""
    w = get_workload("decoder")
    return make(backends.load("numpy_ref"), w, weights(w), dtype="float64")


@pytest.mark.parametrize(
    "backend",
    [p if p.id in QUICK else pytest.param(*p.values, marks=[*p.marks, pytest.mark.slow], id=p.id)
     for p in backend_params(backends.names())],
    indirect=True,
)  # fmt: skip
def test_generates_as_the_reference(backend, dtype, models, reference):
    if backend.NAME == "numpy_ref":
        pytest.skip("the reference itself: its cache is checked against its full recompute "
                    "(tests/test_generation.py)")  # fmt: skip
    w = get_workload("decoder")
    model = models(backend, w, dtype)
    if not model.GENERATES:
        pytest.skip(f"backend {backend.NAME!r} does not generate (no KV-cache decoding)")
    tol = w.tolerances[dtype].forward
    for prompts, new in ((gate_prompts(3, 16), 16), (gate_prompts(2, 1, seed=1), 127)):
        g = gate_generation(model, reference, prompts, new, tol)
        assert g.equivalent, f"{backend.NAME} {dtype}: {g}"
        if dtype == "float64":
            assert g.tokens_equal, f"{backend.NAME}: {g}"
