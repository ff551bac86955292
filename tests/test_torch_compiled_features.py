"""torch's default for forward-only workloads: ``torch.compile`` (inductor) with freezing, a
static graph per batch shape. The compiled program passes the gate in fp32 and bf16, new
weights reach it (no frozen constant outlives them), training stays eager, and inductor's
process-wide freezing setting is left as it was. The suite's runtimes ask for eager torch by
default (``tests/conftest.py``'s ``eager_torch``); these tests ask for the runner's default
through the Runtime (``options={"compile": "default"}``), as ``rosetta bench`` does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch._inductor import config as inductor_config

from rosetta.backends import make
from rosetta.runner.data import feature_images
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload


@pytest.fixture(autouse=True)
def _default_compile(eager_torch, monkeypatch):
    from tests.conftest import torch_compile_default

    torch_compile_default(monkeypatch, "default")  # the runner's
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.slow  # a torch.compile of ResNet-50: 9-16 s
def test_the_compiled_resnet50_program_bench_times_passes_the_gate():
    """The program ``rosetta bench`` times for torch x resnet50 (the Runtime's default compile
    setting: inductor with freezing), whole, at 32x32 and the gate's batch of 2."""
    w = get_workload("resnet50").at_image_size(32)
    params = canonical_weights(w)
    model = make("torch", w, params, options={"compile": "default"})
    assert model.compile_backend == "inductor" and model.freezing
    assert model.manifest()["compile_reason"].startswith("default: a forward-only float32")
    result = run_gate(model, w, params, feature_images(w, 0, 2), None, "float32")
    assert result.equivalent, result.divergence
    assert model.frozen_shapes == {(2, 3, 32, 32)}


def test_the_runtime_switch_decides_and_the_manifest_says_why():
    w = _stem()
    params = canonical_weights(w)
    off = make("torch", w, params, options={"compile": "off"})
    assert off.compile_backend is None and off.manifest()["compile"] == "eager"
    assert "torch_compile off" in off.manifest()["compile_reason"]
    f64 = make("torch", w, params, dtype="float64", options={"compile": "default"})
    assert f64.compile_backend is None and "float64" in f64.manifest()["compile_reason"]
    on = make("torch", get_workload("cnn"), canonical_weights(get_workload("cnn")),
              options={"compile": "on"}, compile="aot_eager")  # fmt: skip
    assert on.compile_backend == "aot_eager"  # the build option wins over the runtime


def _stem():
    """A small forward-only workload: ResNet-50's stem and first residual block, pooled
    (the same ops, convolution, BatchNorm folding and all, at a few seconds of inductor)."""
    res = get_workload("resnet50").at_image_size(32)
    return dataclasses.replace(res, name="resnet_stem", graph=res.graph[:6] + res.graph[-1:])


def test_forward_only_compiles_with_freezing_and_training_stays_eager():
    w = _stem()
    model = make("torch", w, canonical_weights(w))
    assert model.compile_backend == "inductor" and model.freezing
    assert "inductor freezing" in model.manifest()["compile"]
    cnn = get_workload("cnn")
    trained = make("torch", cnn, canonical_weights(cnn))
    assert trained.compile_backend is None and not trained.freezing
    assert trained.manifest()["compile"] == "eager"


# both in the slow tier (quick-tier budget, stop 58): the quick tier compiles the frozen program
# in test_new_weights_reach_the_frozen_program_and_would_not_without_the_reset
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_compiled_frozen_program_passes_the_gate(precision):
    w = _stem()
    params = canonical_weights(w)
    model = make("torch", w, params, precision=precision)
    key = "float32" if precision == "fp32" else "bf16"
    result = run_gate(model, w, params, feature_images(w, 0, 2), None, key)
    assert result.equivalent, result.divergence
    assert model.frozen_shapes == {(2, 3, 32, 32)}  # the gate's batch compiled, frozen
    assert inductor_config.freezing is False  # switched on for this model's compiles only


def test_new_weights_reach_the_frozen_program_and_would_not_without_the_reset(monkeypatch):
    w = _stem()
    p0 = canonical_weights(w)
    p1 = {k: (v * 1.5 if k.endswith("kernel") else v) for k, v in p0.items()}
    x = feature_images(w, 0, 2)
    eager_p1 = make("torch", w, p1, compile=False).predict_numpy(x)
    model = make("torch", w, p0)
    before = model.predict_numpy(x)
    assert not np.allclose(before, eager_p1, rtol=1e-3)  # the two weight sets differ here
    model.set_params(p1)
    np.testing.assert_allclose(model.predict_numpy(x), eager_p1, rtol=1e-4, atol=1e-5)
    # planted defect: without dropping the compiled graphs the old weights stay folded in
    torch._dynamo.reset()
    stale = make("torch", w, p0)
    stale.predict_numpy(x)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    stale.set_params(p1)
    np.testing.assert_allclose(stale.predict_numpy(x), before, rtol=1e-6)
