"""Paddle-specific checks the conformance suite does not make: the optimisers' conventions in
float64 against the NumPy reference (Paddle's Adam and AdamW are the spec's rules; its Momentum
holds the momentum in float32, hence ``SpecMomentum`` in float64), why the attention is composed
rather than Paddle's CPU ``scaled_dot_product_attention``, the ``to_static`` path gated like the
dynamic graph, the bf16 refusal, and that Paddle loads in a process that holds TensorFlow.

Tolerances: the optimiser checks run three steps on one small tensor in float64, where the
reference's order of operations is reproduced, so 1e-14 relative to the change (a few ulps);
Paddle's own Momentum misses that by ~1e6x (0.9 rounded to float32 is 2.6e-8 off)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.backends.numpy_ref import optim as ref_optim
from rosetta.errors import BackendError
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.workload import SGD, Adam, AdamW
from tests.conformance.conftest import gate_batch

if not backends.status("paddle").usable:
    pytest.skip("paddle is not installed", allow_module_level=True)

from rosetta.backends.paddle import optim  # noqa: E402
from rosetta.backends.paddle.compat import paddle  # noqa: E402

RTOL = 1e-14


def _steps(make_opt, grads, w0, dtype):
    """``w`` after one optimiser step per gradient, the gradient planted as ``d(sum(w*g))``."""
    p = paddle.create_parameter(
        list(w0.shape), dtype, default_initializer=paddle.nn.initializer.Assign(w0)
    )
    opt = make_opt([p])
    for g in grads:
        (p * paddle.to_tensor(g)).sum().backward()
        opt.step()
        opt.clear_grad()
    return p.numpy()


def _reference(ref, grads, w0):
    params = {"w": w0.copy()}
    for g in grads:
        ref.step(params, {"w": g})
    return params["w"]


def _violation(got, want, w0):
    change = np.abs(want - w0).max()
    return float(np.abs(got - want).max() / (RTOL * change))


RNG = np.random.default_rng(0)
W0 = RNG.standard_normal((5, 4))
#: gradients from O(1) down to eps's order: where epsilon's placement shows
GRADS = [RNG.standard_normal((5, 4)) * s for s in (1.0, 1e-4, 1e-8, 1e-9)]


def test_paddle_adam_is_the_specs_rule_in_float64():
    spec = Adam(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    got = _steps(lambda ps: optim.make_optimizer(spec, ps, "float64"), GRADS, W0, "float64")
    want = _reference(ref_optim.Adam(1e-3, 0.9, 0.999, 1e-8), GRADS, W0)
    assert isinstance(optim.make_optimizer(spec, [], "float64"), paddle.optimizer.Adam)
    assert _violation(got, want, W0) <= 1.0
    # the same check sees Keras'/Chainer's epsilon placement (eps * sqrt(1 - beta2**t))
    keras = _reference(ref_optim.Adam(1e-3, 0.9, 0.999, 1e-8 * np.sqrt(1 - 0.999)), GRADS[:1], W0)
    first = _steps(lambda ps: optim.make_optimizer(spec, ps, "float64"), GRADS[:1], W0, "float64")
    assert _violation(first, keras, W0) > 1.0


ADAMW = AdamW(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decay=("kernel",))
NAMES = ("fc.kernel", "fc.bias")  # the first decays, the second takes the plain Adam step


def _adamw_steps(make_opt, grads, w0):
    """Both tensors of ``NAMES`` (each starting at ``w0``) after one step per gradient."""
    ps = [
        paddle.create_parameter(
            list(w0.shape), "float64", default_initializer=paddle.nn.initializer.Assign(w0)
        )
        for _ in NAMES
    ]
    opt = make_opt(ps)
    for g in grads:
        sum((p * paddle.to_tensor(g)).sum() for p in ps).backward()
        opt.step()
        opt.clear_grad()
    return dict(zip(NAMES, (p.numpy() for p in ps), strict=True))


class _DecayAfterStep(ref_optim.Adam):
    """A wrong AdamW: the decay on the weight after Adam's step, not before it."""

    def step(self, params, grads):
        super().step(params, grads)
        params["fc.kernel"] -= 1e-3 * 0.01 * params["fc.kernel"]


def _adamw_reference(ref, grads, w0):
    params = {n: w0.copy() for n in NAMES}
    for g in grads:
        ref.step(params, dict.fromkeys(NAMES, g))
    return params


def _paddles_adamw(ps):
    decayed = {ps[0].name}  # NAMES[0] decays
    return paddle.optimizer.AdamW(
        1e-3, 0.9, 0.999, 1e-8, ps, weight_decay=0.01, apply_decay_param_fun=decayed.__contains__
    )


def test_float64_adamw_is_the_specs_rule_where_paddles_rounds_the_decay():
    """``SpecAdamW`` (float64) is the spec's rule on the decayed and the plain tensor, over
    gradients down to epsilon's order. Paddle's own AdamW kernel computes the same rule (decay
    before the step, epsilon scaled with sqrt(v) by sqrt(1 - beta2^t)) but holds the decay as a
    float32 attribute: it matches the reference run with 0.01 rounded to float32, not 0.01. The
    same check sees the wrong rules: decay after the step, decay on every tensor, and Paddle's
    Adam with its (coupled, L2) ``weight_decay``, which puts the decay through the moments."""
    made = optim.make_optimizer(ADAMW, [], "float64", names=[])
    assert isinstance(made, optim.SpecAdamW)
    with pytest.raises(ValueError, match="canonical name of every parameter"):
        optim.make_optimizer(ADAMW, [paddle.create_parameter([1], "float64")], "float64")
    got = _adamw_steps(lambda ps: optim.make_optimizer(ADAMW, ps, "float64", NAMES), GRADS, W0)
    ref = ref_optim.AdamW(1e-3, 0.9, 0.999, 1e-8, 0.01, ADAMW.decays)
    want = _adamw_reference(ref, GRADS, W0)
    assert all(_violation(got[n], want[n], W0) <= 1.0 for n in NAMES)
    # why SpecAdamW exists: Paddle's kernel runs the decay as float32(0.01)
    paddles = _adamw_steps(_paddles_adamw, GRADS, W0)
    assert _violation(paddles["fc.kernel"], want["fc.kernel"], W0) > 1e3
    f32 = ref_optim.AdamW(1e-3, 0.9, 0.999, 1e-8, float(np.float32(0.01)), ADAMW.decays)
    rounded = _adamw_reference(f32, GRADS, W0)
    assert all(_violation(paddles[n], rounded[n], W0) <= 1.0 for n in NAMES)
    # the decay reached the kernel only: the bias took the plain Adam step
    plain = _reference(ref_optim.Adam(1e-3, 0.9, 0.999, 1e-8), GRADS, W0)
    assert _violation(got["fc.bias"], plain, W0) <= 1.0
    assert _violation(got["fc.kernel"], plain, W0) > 1e3
    after = _adamw_reference(_DecayAfterStep(1e-3, 0.9, 0.999, 1e-8), GRADS, W0)
    assert _violation(got["fc.kernel"], after["fc.kernel"], W0) > 1e3
    everywhere = _adamw_reference(
        ref_optim.AdamW(1e-3, 0.9, 0.999, 1e-8, 0.01, lambda n: True), GRADS, W0
    )
    assert _violation(got["fc.bias"], everywhere["fc.bias"], W0) > 1e3

    def coupled(ps):
        return paddle.optimizer.Adam(1e-3, 0.9, 0.999, 1e-8, ps, weight_decay=0.01)

    l2 = _adamw_steps(coupled, GRADS, W0)
    assert _violation(l2["fc.kernel"], want["fc.kernel"], W0) > 1e3


def test_float64_layer_norm_is_the_specs_where_paddles_kernel_rounds_epsilon():
    """Why ``lowering.LayerNorm`` writes the float64 normalisation out: Paddle's ``layer_norm``
    kernel holds epsilon as a float32 attribute, so it matches the reference run with 1e-5
    rounded to float32, and misses the reference at the spec's 1e-5 by far more than float64's
    forward bound (1e-10 relative); the written-out layer is within a few ulps."""
    from rosetta.backends.numpy_ref import seq
    from rosetta.backends.paddle.lowering import LayerNorm, default_dtype

    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5, 16)) * 0.05  # the embeddings' scale, where eps matters most
    want, _ = seq.layer_norm_forward(x, np.ones(16), np.zeros(16), 1e-5)
    rounded, _ = seq.layer_norm_forward(x, np.ones(16), np.zeros(16), float(np.float32(1e-5)))

    def rel(a, b):
        return float(np.abs(a - b).max() / np.abs(b).max())

    kernel = paddle.nn.functional.layer_norm(paddle.to_tensor(x), 16, epsilon=1e-5).numpy()
    assert rel(kernel, rounded) < 1e-14 and rel(kernel, want) > 1e-11
    with default_dtype("float64"):
        layer = LayerNorm(16, 1e-5)
    assert layer.written_out
    assert rel(layer(paddle.to_tensor(x)).numpy(), want) < 1e-14


def test_paddles_sdpa_on_the_cpu_breaks_the_fully_masked_row_rule():
    """Why ``lowering.SelfAttention`` composes matmul and softmax: Paddle's CPU
    ``scaled_dot_product_attention`` gives NaN for a query whose every key is masked, where the
    spec (and the composed layer, on the same tensors) gives 0."""
    from rosetta.backends.paddle.lowering import SelfAttention, default_dtype

    rng = np.random.default_rng(1)
    x = paddle.to_tensor(rng.standard_normal((2, 3, 8)))  # (N, T, E), float64
    valid = paddle.to_tensor(np.array([[False, True, True], [False, False, False]]))
    q = x.reshape([2, 3, 2, 4])  # (N, T, H, d): Paddle's SDPA layout
    mask = valid.unsqueeze([1, 2])  # (N, 1, 1, T), True: the key takes part
    out = paddle.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert np.isfinite(out.numpy()[0]).all() and np.isnan(out.numpy()[1]).all()
    with default_dtype("float64"):
        layer = SelfAttention(8, 2)
    y = layer(x, valid).numpy()
    assert np.isfinite(y).all()
    np.testing.assert_array_equal(y[1], np.broadcast_to(layer.output.bias.numpy(), (3, 8)))


def test_float32_adamw_is_paddles_own_and_matches_the_reference():
    one = [paddle.create_parameter([1], "float32")]
    made = optim.make_optimizer(ADAMW, one, "float32", names=["fc.kernel"])
    assert isinstance(made, paddle.optimizer.AdamW)
    w0 = W0.astype(np.float32)
    grads = [g.astype(np.float32) for g in GRADS[:3]]
    ps = [
        paddle.create_parameter(
            [5, 4], "float32", default_initializer=paddle.nn.initializer.Assign(w0)
        )
        for _ in NAMES
    ]
    opt = optim.make_optimizer(ADAMW, ps, "float32", NAMES)
    for g in grads:
        sum((p * paddle.to_tensor(g)).sum() for p in ps).backward()
        opt.step()
        opt.clear_grad()
    want = _adamw_reference(ref_optim.AdamW(1e-3, 0.9, 0.999, 1e-8, 0.01, ADAMW.decays), grads, w0)
    for n, p in zip(NAMES, ps, strict=True):  # within a few float32 ulps of each weight
        assert (np.abs(p.numpy() - want[n]) <= 4 * np.spacing(np.abs(want[n]))).all(), n
    # the decay (3e-5 of a weight over the three steps) is far outside that
    plain = _reference(ref_optim.Adam(1e-3, 0.9, 0.999, 1e-8), grads, w0)
    assert not (np.abs(ps[0].numpy() - plain) <= 4 * np.spacing(np.abs(plain))).all()


@pytest.mark.parametrize("nesterov", [False, True])
def test_float64_momentum_is_the_specs_rule_where_paddles_is_not(nesterov):
    spec = SGD(lr=0.01, momentum=0.9, nesterov=nesterov)
    want = _reference(ref_optim.SGD(0.01, 0.9, nesterov), GRADS, W0)
    ours = optim.make_optimizer(spec, [], "float64")
    assert isinstance(ours, optim.SpecMomentum)
    got = _steps(lambda ps: optim.make_optimizer(spec, ps, "float64"), GRADS, W0, "float64")
    assert _violation(got, want, W0) <= 1.0

    def paddles(ps):
        return paddle.optimizer.Momentum(0.01, 0.9, ps, use_nesterov=nesterov)

    # why SpecMomentum exists: Paddle's kernel runs the momentum as float32(0.9)
    assert _violation(_steps(paddles, GRADS, W0, "float64"), want, W0) > 1e3
    f32 = _reference(ref_optim.SGD(0.01, float(np.float32(0.9)), nesterov), GRADS, W0)
    assert _violation(_steps(paddles, GRADS, W0, "float64"), f32, W0) <= 1.0


def test_float32_momentum_is_paddles_own_and_matches_the_reference():
    spec = SGD(lr=0.01, momentum=0.9)
    one = [paddle.create_parameter([1], "float32")]
    assert isinstance(optim.make_optimizer(spec, one, "float32"), paddle.optimizer.Momentum)
    w0 = W0.astype(np.float32)
    grads = [g.astype(np.float32) for g in GRADS[:3]]
    got = _steps(lambda ps: optim.make_optimizer(spec, ps, "float32"), grads, w0, "float32")
    want = _reference(ref_optim.SGD(0.01, 0.9), grads, w0)
    change = np.abs(want - w0).max()
    assert np.abs(got - want).max() <= 1e-6 * change  # a few float32 ulps of the change


@pytest.mark.parametrize(
    "name", ["cnn", "gru", pytest.param("transformer", marks=pytest.mark.slow)]
)
def test_to_static_steps_pass_the_gate_like_the_dynamic_graph(name):
    w = get_workload(name)
    params = canonical_weights(w, 0)
    x, y = gate_batch(w, n=2)
    model = make("paddle", w, params, dtype="float64", options={"static": "on"})
    assert model.static and model.manifest()["compile"].startswith("paddle.jit.to_static")
    result = run_gate(model, w, params, x, y, "float64")
    assert result.equivalent, result.divergence
    model.set_params(params)  # dropout switched back on: the same program, the spec's rates
    assert all(d.rate.numpy() == d.spec_rate for d in model.dropouts)


def test_to_static_default_and_bad_setting():
    from rosetta.backends import runtime_for

    assert runtime_for("paddle").option("static") == "default"  # the declared default, in effect
    with pytest.raises(BackendError, match="option paddle.static: 'fast' is not one of default"):
        runtime_for("paddle", options={"static": "fast"})
    with pytest.raises(BackendError, match="backend 'paddle' has no option 'compile'"):
        runtime_for("paddle", options={"compile": "on"})


def test_a_run_pins_its_framework_options(tmp_path):
    from rosetta.errors import RosettaError
    from rosetta.runner.rundir import RunDir

    first = {"profile": "ci", "options": {"paddle": {"static": "on"}}}
    with RunDir(tmp_path, "p", first, create=True):
        pass
    with pytest.raises(RosettaError, match="run 'p' was made with options="):
        RunDir(tmp_path, "p", {**first, "options": {}}, create=False)
    with RunDir(tmp_path, "old", {"profile": "ci"}, create=True):  # made before the setting
        pass
    with RunDir(tmp_path, "old", {"profile": "ci", "options": {}}, create=False):
        pass


def test_bf16_is_refused_with_the_reason():
    why = backends.precision_unsupported("paddle", "bf16", "cpu")
    assert "bfloat16" in why and "fp32" in why
    w = get_workload("cnn")
    with pytest.raises(BackendError, match="does not run precision bf16"):
        make("paddle", w, canonical_weights(w, 0), precision="bf16")
    # the reason holds: Paddle's CPU matmul has no bfloat16 kernel
    a = paddle.ones([2, 2]).astype("bfloat16")
    with pytest.raises(RuntimeError, match="bfloat16"):
        paddle.matmul(a, a)


@pytest.mark.slow  # ~25 s: TensorFlow's import
def test_paddle_loads_after_tensorflow_in_one_process():
    """Without compat's RTLD_DEEPBIND this is a segmentation fault inside libpaddle."""
    if not backends.status("tensorflow").usable:
        pytest.skip("tensorflow is not installed")
    code = (
        "import tensorflow\n"
        "from rosetta.backends.paddle.compat import paddle\n"
        "g = paddle.nn.GRU(3, 4)\n"
        "_, h = g(paddle.ones([2, 5, 3]))\n"
        "h.sum().backward()\n"
        "print('ok', g.weight_ih_l0.grad.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-1500:]
    assert out.stdout.strip().splitlines()[-1].startswith("ok")


@pytest.mark.parametrize(
    "name,size,dtype,rtol",
    [
        ("cnn", None, "float64", 1e-10),
        ("gru", None, "float64", 1e-10),
        ("resnet50", 32, "float64", 1e-10),
        ("transformer", None, "float32", 1e-5),
    ],
)
def test_handwritten_models_compute_what_the_lowered_ones_compute(name, size, dtype, rtol):
    """The speed benchmark (``benchmarks/lowering_paddle.py``) compares the two; it only means
    something if they are the same model, the lowered tensors loaded by position. float64:
    only the kernels' summation order may differ (~1e-16 per op, compounded over ResNet's 53
    convolutions), hence 1e-10 relative. The transformer in float32, the dtype it is timed in:
    in float64 the lowered model writes LayerNorm out because Paddle's kernel takes epsilon as a
    float32 attribute (``lowering.LayerNorm``: 1.8e-10 relative measured between the two here),
    while the hand-written one runs the kernel as users do; in float32 both run Paddle's kernel,
    and what differs is the mask's form (additive -1e9 against a -inf select: an exact 0 weight
    either way) and summation order, a few float32 ulps (1e-5 relative). Each transformer row
    holds a real token (the additive mask averages the padding of a row of padding only, where
    the spec's rule gives 0)."""
    from benchmarks.handwritten import paddle_models as hw
    from rosetta.backends.paddle.lowering import default_dtype

    w = get_workload(name)
    w = w.at_image_size(size) if size else w
    model = make("paddle", w, canonical_weights(w), dtype=dtype)
    with default_dtype(dtype):
        hand = hw.MODELS[name]()
    hw.copy_weights(model.net, hand)
    hand.eval()
    x, _ = gate_batch(w, n=2)
    if name == "transformer":
        x[:, 0] = np.maximum(x[:, 0], 1)  # a real first token in every row
    batch = next(iter(model.loader(x, None, np.arange(2), 2)))
    want = hw.features_step(hand, batch[0]).numpy()
    got = model.to_numpy(model.predict(batch))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2 * np.abs(want).max())


def test_a_request_is_the_loader_s_batch_without_its_dataloader():
    """``request_batch`` (the serving path's: no ``DataLoader`` per request) gives the loader's
    very batch: the ids as int64, on the same place."""
    w = get_workload("gru")
    model = make("paddle", w, canonical_weights(w), dtype="float64")
    x = np.random.default_rng(0).integers(0, 30000, size=(3, *w.input.shape)).astype(np.int32)
    (want,) = next(iter(model.loader(x, None, np.arange(3), 3)))
    (got,) = model.request_batch(x)
    assert got.dtype == want.dtype == paddle.int64 and str(got.place) == str(want.place)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.slow  # two ResNet-50 builds and an export: ~6 s; the quick tier is near its budget
def test_forward_only_float32_runs_through_paddle_inference_and_equals_the_dynamic_graph():
    """ResNet-50's features (forward only, float32, CPU) run through Paddle Inference with
    oneDNN by default (``predictor.py``); the same weights through the dynamic graph
    (``predictor=dygraph``) give the same features to float32 rounding across two kernel
    libraries (oneDNN's fused conv+BN+ReLU against im2col + GEMM: 1e-5 relative, ~100 ulps
    compounded over 53 convolutions); new weights reach the predictor (it holds a snapshot, so
    ``set_params`` must rebuild it); float64 and training keep the dynamic graph, saying why."""
    w = get_workload("resnet50").at_image_size(32)
    params = canonical_weights(w)
    fast = make("paddle", w, params, dtype="float32")
    plain = make("paddle", w, params, dtype="float32", options={"predictor": "dygraph"})
    assert (fast.infer, plain.infer) == (True, False)
    x, _ = gate_batch(w, n=2)
    want = plain.predict_numpy(x)
    np.testing.assert_allclose(fast.predict_numpy(x), want, rtol=1e-5, atol=1e-6 * abs(want).max())
    assert "oneDNN on" in fast.manifest()["features"]
    last = [k for k in params if k.endswith(".gamma")][-1]  # the last BatchNorm's scale
    scaled = {**params, last: params[last] * 1.5}
    fast.set_params(scaled)
    plain.set_params(scaled)
    want2 = plain.predict_numpy(x)
    assert np.abs(want2 - want).max() > 1e-2 * np.abs(want).max()  # the change is visible
    np.testing.assert_allclose(
        fast.predict_numpy(x), want2, rtol=1e-5, atol=1e-6 * abs(want2).max()
    )
    assert not make("paddle", w, params, dtype="float64").infer
    gru = get_workload("gru")
    model = make("paddle", gru, canonical_weights(gru), dtype="float32")
    assert not model.infer and "training workload" in model.infer_reason
