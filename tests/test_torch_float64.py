"""torch under its runner default (forward-only float32 compiles with inductor freezing) runs
float64 and the localiser's prefix cuts eagerly, says so in the manifest, and computes what the
float64 reference computes. The suite runs torch eager (``tests/conftest.py``); these tests set
the Runtime's default back to the runner's (``options={"compile": "default"}``), as
``tests/test_torch_compiled_features.py`` does.

Before: ``--dtype float64`` on ResNet-50 failed in inductor (``BackendCompilerFailed ...
Double``), and so did the localiser's float64 forward probe ("localisation failed")."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rosetta.backends import make
from rosetta.runner import localise
from rosetta.runner.data import feature_images
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload


@pytest.fixture(autouse=True)
def _default_compile(monkeypatch):
    from tests.conftest import torch_compile_default

    torch_compile_default(monkeypatch, "default")  # the runner's
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_float64_resnet50_runs_eager_and_matches_the_reference():
    w = get_workload("resnet50").at_image_size(32)
    params = canonical_weights(w)
    model = make("torch", w, params, dtype="float64")
    man = model.manifest()
    assert model.compile_backend is None and not model.freezing
    assert man["compile"] == "eager" and "float64" in man["compile_reason"]
    result = run_gate(model, w, params, feature_images(w, 0, 2), None, "float64")
    assert result.equivalent, result.divergence  # float64 bounds: 1e-10 relative
    # the float32 program is still the compiled one, as measured
    assert make("torch", w, params).compile_backend == "inductor"


def test_the_localisers_prefix_cuts_build_eager_and_probe_in_float64():
    """A float64 forward probe of a forward-only workload: every prefix a ``probe`` task,
    eager, within the float64 bound (a stem and one residual block: the same ops)."""
    res = get_workload("resnet50").at_image_size(32)
    w = dataclasses.replace(res, graph=res.graph[:6] + res.graph[-1:])
    params = canonical_weights(w)
    built = []

    def build(wl, p, dtype):
        built.append(make("torch", wl, p, dtype=dtype))
        return built[-1]

    tol = w.tolerances["float64"].forward
    errors = localise.forward_probe(build, w, params, feature_images(w, 0, 2), "float64", tol)
    assert [e.violation <= 1.0 for e in errors] == [True] * len(w.graph), errors
    assert all(m.workload.task == localise.PROBE_TASK for m in built)
    assert all(m.compile_backend is None for m in built)
    assert all(localise.PROBE_TASK in m.manifest()["compile_reason"] for m in built)
