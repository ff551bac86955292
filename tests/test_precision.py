"""bf16 (mixed precision) as a spec-level policy: torch runs it under ``torch.autocast``, the gate
holds it to the YAML's bf16 tolerances against the float64 reference, and that gate still
catches a planted defect (the GRU's z/r gate blocks swapped) inside the torch bf16 model.
Backends without bf16 refuse it in one line; an unknown precision is one line too."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make, runtime_for
from rosetta.errors import BackendError, RosettaError
from rosetta.runner.cell import gate_key
from rosetta.runner.gate import run_gate
from rosetta.runtime import Runtime
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.workload import Tolerance
from tests import planted
from tests.conformance.conftest import gate_batch

torch = pytest.importorskip("torch")
from rosetta.backends.torch.model import TorchModel  # noqa: E402 - after the importorskip


def _workload(name):
    w = get_workload(name)
    return w.at_image_size(32) if name == "resnet50" else w


def _build(module):
    """``build(workload, params, key)`` as the cell makes it: ``bf16`` = the policy over float32
    master weights; a dtype = that dtype at precision fp32 (the float64 optimiser check)."""

    def build(w, p, key):
        if key == "bf16":
            return make(module, w, p, precision="bf16")
        return make(module, w, p, dtype=key)

    return build


class _SwappedZR(TorchModel):
    """The torch bf16 model with the GRU's z and r blocks exchanged when weights are loaded."""

    def set_params(self, params):
        p = dict(params)
        if "gru.kernel" in p:
            for k in ("gru.kernel", "gru.recurrent_kernel", "gru.bias_input", "gru.bias_recurrent"):
                p[k] = planted._swap_zr(np.asarray(params[k]))
        super().set_params(p)


@pytest.mark.parametrize(
    "name", ["cnn", "gru", "resnet50", pytest.param("transformer", marks=pytest.mark.slow),
             pytest.param("decoder", marks=pytest.mark.slow)]
)  # fmt: skip
def test_torch_bf16_passes_the_bf16_gate(name):
    w = _workload(name)
    params = canonical_weights(w, 0)
    x, y = gate_batch(w, n=4 if w.task == "train" else 2, seed=1)
    model = make("torch", w, params, precision="bf16")
    assert model.runtime.precision == "bf16"
    result = run_gate(model, w, params, x, y, "bf16", build=_build("torch"))
    assert result.equivalent, result.divergence
    if w.task == "train":  # the float64 optimiser check ran, at precision fp32
        assert any(c.what == "params (float64)" for c in result.checks)
        assert "precision fp32" in result.note


@pytest.mark.slow
def test_torch_bf16_generation_holds_every_step_to_the_bf16_forward_bound():
    """The decoder generating under autocast: each step's logits (prefill and decode, fed the
    reference's tokens) within the bf16 forward bound of the float64 reference's; the tokens
    themselves may differ at a near tie (reported by the gate, not required)."""
    from rosetta.runner.generation import gate_generation

    w = get_workload("decoder")
    params = canonical_weights(w, 0)
    model = make("torch", w, params, precision="bf16")
    ref = make("numpy_ref", w, params, dtype="float64")
    prompts = gate_batch(w, n=2, seed=1)[0][:, :16]
    g = gate_generation(model, ref, prompts, 8, w.tolerances["bf16"].forward)
    assert g.logits_violation <= 1.0, g


# the quick tier gates tensorflow's bf16 on the CNN (JAX's compiles for ~20 s); every other
# (backend, workload) is the slow tier's
@pytest.mark.parametrize("backend", [pytest.param("jax", marks=pytest.mark.slow), "tensorflow"])
@pytest.mark.parametrize(
    "name", ["cnn", pytest.param("gru", marks=pytest.mark.slow),
             pytest.param("resnet50", marks=pytest.mark.slow),
             pytest.param("transformer", marks=pytest.mark.slow)]
)  # fmt: skip
def test_other_bf16_backends_pass_the_bf16_gate(backend, name):
    module = backends.load(backend)
    if not module.available()[0]:
        pytest.skip(f"{backend} not installed")
    w = _workload(name)
    params = canonical_weights(w, 0)
    x, y = gate_batch(w, n=4 if w.task == "train" else 2, seed=1)
    model = make(module, w, params, precision="bf16")
    assert "bf16" in model.manifest()["precision_mode"]
    result = run_gate(model, w, params, x, y, "bf16", build=_build(module))
    assert result.equivalent, result.divergence
    fwd = w.tolerances["float32"].forward  # and bf16 really computed in bf16: fp32 bounds fail
    ref = make("numpy_ref", w, params, dtype="float64").predict_numpy(x)
    assert fwd.violation(model.predict_numpy(x), ref) > 1.0


def test_bf16_really_computes_in_bf16():
    """The fp32 bounds fail a bf16 forward: bf16 is not fp32 with a label (an honest policy)."""
    w = _workload("cnn")
    params = canonical_weights(w, 0)
    x, _ = gate_batch(w, n=4, seed=1)
    ref = make("numpy_ref", w, params, dtype="float64").predict_numpy(x)
    out16 = make("torch", w, params, precision="bf16").predict_numpy(x)
    out32 = make("torch", w, params).predict_numpy(x)
    fp32 = w.tolerances["float32"].forward
    assert fp32.violation(out32, ref) <= 1.0
    assert fp32.violation(out16, ref) > 1.0  # bf16's 2^-8 round-off shows at fp32's 1e-4 bound
    assert w.tolerances["bf16"].forward.violation(out16, ref) <= 1.0


def test_bf16_gate_catches_swapped_gru_gates_in_the_torch_bf16_model():
    w = _workload("gru")
    params = canonical_weights(w, 0)
    x, y = gate_batch(w, n=4, seed=1)
    runtime = runtime_for("torch", precision="bf16")
    model = _SwappedZR(w, params, runtime)
    result = run_gate(model, w, params, x, y, "bf16", build=_build("torch"))
    assert not result.equivalent
    assert result.divergence.startswith("forward diverge"), result.divergence
    fwd = next(c for c in result.checks if c.what == "forward")
    assert fwd.violation > 1.5, fwd  # outside; a correct model sits at ~0.25 of the bound
    ok = run_gate(make("torch", w, params, precision="bf16"), w, params, x, y, "bf16")
    assert next(c for c in ok.checks if c.what == "forward").violation < fwd.violation / 4


class _KeyHeadsDimMajor(TorchModel):
    """The torch bf16 transformer with each key kernel's columns split into heads dim-major
    ((d, h) instead of the spec's head-major (h, d)) when weights are loaded: a layout slip on
    one projection."""

    def set_params(self, params):
        p = dict(params)
        for k in [k for k in p if k.endswith("key_kernel")]:
            a = np.asarray(params[k])
            p[k] = a.reshape(a.shape[0], 4, -1).transpose(0, 2, 1).reshape(a.shape)
        super().set_params(p)


@pytest.mark.slow
def test_bf16_gate_catches_a_head_split_slip_in_the_torch_bf16_transformer():
    w = _workload("transformer")
    params = canonical_weights(w, 0)
    x, y = gate_batch(w, n=4, seed=1)
    model = _KeyHeadsDimMajor(w, params, runtime_for("torch", precision="bf16"))
    result = run_gate(model, w, params, x, y, "bf16")
    assert not result.equivalent
    fwd = next(c for c in result.checks if c.what == "forward")
    assert fwd.violation > 4, fwd  # the logits move by ~0.5 of their scale; bf16 alone ~0.01


def test_manifest_says_what_ran_in_bf16():
    w = _workload("gru")
    m = make("torch", w, canonical_weights(w, 0), precision="bf16").manifest()
    assert m["precision"] == "bf16"  # typed: the policy name
    assert "torch.autocast bfloat16 on cpu" in m["precision_mode"]
    assert "GRU" in m["precision_mode"]  # CPU autocast keeps nn.GRU in fp32: said, not hidden


def test_autocast_leaves_the_gru_fp32_on_the_cpu_as_the_manifest_says():
    gru, lin = torch.nn.GRU(4, 3, batch_first=True), torch.nn.Linear(3, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = gru(torch.randn(2, 5, 4))
        assert out.dtype == torch.float32
        assert lin(out[:, -1]).dtype == torch.bfloat16


def test_bf16_keeps_fp32_master_weights_and_loss():
    w = _workload("cnn")
    params = canonical_weights(w, 0)
    x, y = gate_batch(w, n=4, seed=1)
    model = make("torch", w, params, precision="bf16")
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    loss = model.train_step(batch)
    assert loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.net.parameters())
    state = model.optimizer.state_dict()["state"]
    assert state and all(s["momentum_buffer"].dtype == torch.float32 for s in state.values())


def test_bf16_with_float64_is_refused_in_one_line():
    w = _workload("cnn")
    with pytest.raises(BackendError, match="float32 master weights") as e:
        make("torch", w, canonical_weights(w, 0), dtype="float64", precision="bf16")
    assert "\n" not in str(e.value)


def test_a_backend_without_bf16_refuses_it_with_its_reason():
    chainer = backends.load("chainer")
    assert "bf16" not in chainer.PRECISIONS
    assert "bfloat16" in chainer.UNSUPPORTED_PRECISIONS["bf16"]
    w = _workload("cnn")
    if not chainer.available()[0]:
        pytest.skip("chainer not installed")
    with pytest.raises(BackendError, match="does not run precision bf16") as e:
        make(chainer, w, canonical_weights(w, 0), precision="bf16")
    assert "bfloat16" in str(e.value) and "\n" not in str(e.value)


def test_unknown_precision_is_one_line():
    with pytest.raises(BackendError, match="unknown precision 'bf8'") as e:
        Runtime.request("torch", precision="bf8")
    assert "\n" not in str(e.value)


def test_gate_key_and_a_workload_without_bf16_tolerances():
    w = _workload("cnn")
    rt = Runtime.request("torch")
    assert gate_key(w, rt) == "float32"
    assert gate_key(w, replace(rt, precision="bf16")) == "bf16"
    bare = replace(w, tolerances={k: v for k, v in w.tolerances.items() if k != "bf16"})
    with pytest.raises(RosettaError, match="states no bf16 tolerances"):
        gate_key(bare, replace(rt, precision="bf16"))


def test_a_tf32_cell_is_gated_at_the_tf32_set_not_float32s():
    """TF32 rounds matmul/conv inputs to 10 bits: on an H200 it failed the float32 bounds 38-55x
    (docs/gpu/), so a float32 cell with TF32 allowed takes the ``tf32`` set; TF32 touches
    nothing in float64 or under bf16 autocast, whose own sets stay theirs."""
    w = _workload("cnn")
    rt = replace(Runtime.request("torch"), device="cuda", tf32=True)
    assert gate_key(w, rt) == "tf32"
    assert gate_key(w, replace(rt, tf32=False)) == "float32"
    assert gate_key(w, replace(rt, dtype="float64")) == "float64"
    assert gate_key(w, replace(rt, precision="bf16")) == "bf16"
    bare = replace(w, tolerances={k: v for k, v in w.tolerances.items() if k != "tf32"})
    with pytest.raises(RosettaError, match="states no tf32 tolerances.*without --tf32") as e:
        gate_key(bare, rt)
    assert "\n" not in str(e.value)


def test_every_shipped_workload_states_bf16_tolerances():
    for name in ("cnn", "gru", "resnet50", "transformer"):
        tol = get_workload(name).tolerances
        assert "bf16" in tol
        # bf16's bounds are looser than float32's and never looser than 1 (they must fail O(1))
        assert tol["bf16"].forward.rtol > tol["float32"].forward.rtol
        assert tol["bf16"].forward.rtol < 1.0


def test_norm_scale_against_numpy():
    t = Tolerance(rtol=0.1, atol=0.0, scale="norm")
    b = np.array([3.0, 4.0])
    a = b + np.array([0.3, 0.4])  # ||a - b|| = 0.5 = 0.1 * ||b||
    assert t.violation(a, b) == pytest.approx(1.0)
    assert t.violation(b, b) == 0.0
