"""What only the torch backend has to prove, beyond the conformance suite (which it also passes):
the optimisers' rules in float64 against the reference's, each weight conversion, both memory
formats, BatchNorm kept in inference mode, the fast-path switches, the runtime read back from
torch, dropout gated inside the timed step, and the hand-written models.

No test here compiles with inductor (minutes on a small CPU; the compile-count test uses a
counting backend that runs the captured graph as is) or times anything.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from benchmarks.handwritten import torch_models as hw  # noqa: E402
from rosetta.backends import make, numpy_ref, runtime_for  # noqa: E402
from rosetta.backends import torch as tb  # noqa: E402
from rosetta.backends.binding import gru_bias_rzn  # noqa: E402
from rosetta.backends.numpy_ref import optim as ref_optim  # noqa: E402
from rosetta.backends.torch import model as torch_model  # noqa: E402
from rosetta.backends.torch.lowering import GatedDropout  # noqa: E402
from rosetta.errors import BackendError  # noqa: E402
from rosetta.runner.gate import run_gate  # noqa: E402
from rosetta.spec import canonical_weights, get_workload, ops  # noqa: E402
from tests.conformance.conftest import gate_batch  # noqa: E402


def _model(name, dtype="float64", size=None, **kw):
    w = get_workload(name)
    w = w.at_image_size(size) if size else w
    return w, make(tb, w, canonical_weights(w), dtype=dtype, **kw)


def _optimiser_vs_reference(name, grad_scales, steps=3):
    """Feed the model's torch.optim the same canonical gradients as numpy_ref.optim, float64."""
    w, model = _model(name)
    p0 = model.get_params()
    ref_params = {k: v.copy() for k, v in p0.items()}
    ref = make(numpy_ref, w, p0, dtype="float64").optimizer  # the spec's rule, written out
    rng = np.random.default_rng(0)
    for _ in range(steps):
        grads = {}
        for n, b in model.binds.items():
            if b.trainable:
                g = rng.normal(size=p0[n].shape) * rng.choice(grad_scales, size=p0[n].shape)
                grads[n] = g
                b.tensor.grad = torch.from_numpy(np.ascontiguousarray(b.to_native(g)))
        model.optimizer.step()
        ref.step(ref_params, grads)
    got = model.get_params()
    return p0, got, ref_params


def test_sgd_momentum_is_the_spec_rule_in_float64():
    # buf = m * buf + g; w -= lr * buf. float64, same operations: only rounding of a handful of
    # flops differs (1e-12 of the change); momentum off would be ~50% off at step 3
    p0, got, want = _optimiser_vs_reference("cnn", grad_scales=[1.0])
    for n in want:
        np.testing.assert_allclose(got[n] - p0[n], want[n] - p0[n], rtol=1e-12, atol=1e-16)


def test_adam_is_algorithm_1_in_float64_even_where_eps_matters():
    # gradients down to 1e-9 (below eps = 1e-8), where the epsilon placement changes the step:
    # Keras' form (eps outside the bias correction) makes those steps ~8x larger (below), far
    # outside these bounds. rtol: torch's sqrt(v)/sqrt(bc2) vs the reference's sqrt(v/bc2) differ
    # by ~1e-16 relative; atol: the change p_k - p_0 is a difference of float64 numbers, so it
    # carries their rounding: two units in the last place of the tensor's largest entry
    p0, got, want = _optimiser_vs_reference("gru", grad_scales=[1e-9, 1e-6, 1.0])
    for n in want:
        atol = 2 * np.spacing(np.abs(p0[n]).max())
        np.testing.assert_allclose(got[n] - p0[n], want[n] - p0[n], rtol=1e-10, atol=atol)


def test_the_adam_test_can_tell_the_epsilon_placements_apart():
    # the same check with Keras' placement (eps * sqrt(1 - beta2^t)) fails at |g| ~ eps
    g = np.full(4, 1e-9)
    p_spec, p_keras = np.zeros(4), np.zeros(4)
    ref_optim.Adam(lr=1e-3, eps=1e-8).step({"w": p_spec}, {"w": g})
    ref_optim.Adam(lr=1e-3, eps=1e-8 * np.sqrt(1 - 0.999)).step({"w": p_keras}, {"w": g})
    assert not np.allclose(p_keras, p_spec, rtol=1e-10, atol=1e-16)
    # step 1: m_hat = g, v_hat = g^2, so the steps are lr g / (g + eps) and lr g / (g + eps')
    np.testing.assert_allclose(p_keras / p_spec, 1.1 / (0.1 + np.sqrt(1e-3)), rtol=1e-9)


def test_gru_gate_blocks_are_reordered_at_the_boundary():
    w, model = _model("gru")
    h, e = 100, 125
    p = canonical_weights(w)
    blocks = np.concatenate([np.full((e, h), 1.0), np.full((e, h), 2.0), np.full((e, h), 3.0)], 1)
    p["gru.kernel"] = blocks.astype(np.float32)  # z = 1, r = 2, h = 3
    p["gru.bias_recurrent"] = np.repeat([10.0, 20.0, 30.0], h).astype(np.float32)
    model.set_params(p)
    gru = model.net[1].gru
    w_ih = gru.weight_ih_l0.detach().numpy()  # (3H, E), rows r | z | n
    np.testing.assert_array_equal(w_ih[:h], 2.0)
    np.testing.assert_array_equal(w_ih[h : 2 * h], 1.0)
    np.testing.assert_array_equal(w_ih[2 * h :], 3.0)
    np.testing.assert_array_equal(gru.bias_hh_l0.detach().numpy()[:h], 20.0)  # b_hr
    np.testing.assert_array_equal(gru.bias_hh_l0.detach().numpy()[2 * h :], 30.0)  # b_hn
    back = model.get_params()
    np.testing.assert_array_equal(back["gru.kernel"], p["gru.kernel"])


def test_dense_kernel_is_transposed_and_fc1_rows_stay_chw():
    w, model = _model("cnn", dtype="float32")
    p = canonical_weights(w)
    fc1 = [m for m in model.net.modules() if isinstance(m, torch.nn.Linear)][0]
    np.testing.assert_array_equal(fc1.weight.detach().numpy(), p["fc1.kernel"].T)
    assert gru_bias_rzn(gru_bias_rzn(np.arange(6.0))).tolist() == list(range(6))


def test_cnn_computes_the_same_in_both_memory_formats():
    # the conformance suite checks the measured default (channels_last) against the reference;
    # NCHW must compute the same function (flatten order, fc1 rows): float64, where only oneDNN's
    # summation order differs (~1e-15 relative), checked at 1e-10 for outputs, loss, gradients
    # and the parameters after 2 SGD steps
    w = get_workload("cnn")
    p = canonical_weights(w)
    x, y = gate_batch(w, n=4)
    runs = {}
    for layout in ("NHWC", "NCHW"):
        model = make(tb, w, p, dtype="float64", layout=layout)
        assert model.manifest()["layout"].startswith(layout)
        loss, grads = model.loss_and_grads(x, y)
        runs[layout] = (model.predict_numpy(x), loss, grads, model.deterministic_steps(x, y, 2))
    (o1, l1, g1, s1), (o2, l2, g2, s2) = runs["NHWC"], runs["NCHW"]
    np.testing.assert_allclose(o1, o2, rtol=1e-10, atol=1e-13)
    assert abs(l1 - l2) <= 1e-12 * abs(l2)
    for n in g2:
        np.testing.assert_allclose(g1[n], g2[n], rtol=1e-10, atol=1e-13 * np.abs(g2[n]).max())
        np.testing.assert_allclose(s1[n] - p[n], s2[n] - p[n], rtol=1e-9, atol=1e-15)


def test_resnet_in_nchw_matches_reference():
    w = get_workload("resnet50").at_image_size(32)
    p = canonical_weights(w)
    model = make(tb, w, p, dtype="float64", layout="NCHW")
    x, _ = gate_batch(w, n=2)
    assert run_gate(model, w, p, x, None, "float64").equivalent


def test_batchnorm_stays_in_inference_mode_and_its_statistics_never_move():
    w, model = _model("resnet50", dtype="float32", size=32)
    before = model.get_params()
    model._mode(True)  # what a train step would switch to
    bns = [m for m in model.net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(bns) == 53 and not any(m.training for m in bns)
    x, _ = gate_batch(w, n=2)
    model.predict_numpy(x)
    after = model.get_params()
    for n in before:
        np.testing.assert_array_equal(after[n], before[n], err_msg=n)


def test_train_step_returns_the_loss_as_a_tensor_and_reset_restarts_training():
    w, model = _model("gru", dtype="float64")
    x, y = gate_batch(w, n=4)
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    loss = model.train_step(batch)
    assert isinstance(loss, torch.Tensor) and loss.ndim == 0 and not loss.requires_grad
    assert all(b.tensor.grad is not None for b in model.binds.values() if b.trainable)
    # set_params resets Adam's state: one step from p0 equals a fresh model's first step
    p0 = canonical_weights(w)
    model.set_params(p0)
    again = model.deterministic_steps(x, y, 1)
    _, fresh = _model("gru", dtype="float64")
    want = fresh.deterministic_steps(x, y, 1)
    for n in want:
        np.testing.assert_array_equal(again[n], want[n], err_msg=n)


def test_manifest_records_the_fast_path():
    _, cnn = _model("cnn", dtype="float32")
    man = cnn.manifest()
    assert man["compile"] == "eager" and man["autotune"] == "n/a"
    assert "torch.optim.SGD" in man["optimizer"] and "'foreach': False" in man["optimizer"]
    assert man["layout"].startswith("NHWC")  # the graph has Conv2D, on the CPU
    assert "DataLoader" in man["loader"] and "num_workers=0" in man["loader"]
    assert "TorchModel.train_step" in man["gated_program"]
    _, gru = _model("gru", dtype="float32")
    assert "torch.optim.Adam" in gru.manifest()["optimizer"]
    _, res = _model("resnet50", dtype="float32", size=32)
    assert res.manifest()["gated_program"].startswith("n/a: forward only")
    assert gru.manifest()["fused_rnn"].startswith("yes")
    assert gru.manifest()["layout"].startswith("NTC")


def test_memory_format_follows_the_graph_not_the_name():
    cnn = get_workload("cnn")
    assert torch_model.memory_format(cnn, "cpu", None) == "NHWC"
    assert torch_model.memory_format(cnn, "cuda", None) == "NCHW"
    assert torch_model.memory_format(cnn, "cpu", "NCHW") == "NCHW"
    # the same image workload under another name, and one without convolutions
    renamed = dataclasses.replace(cnn, name="something_new")
    assert torch_model.memory_format(renamed, "cpu", None) == "NHWC"
    mlp = dataclasses.replace(cnn, graph=(ops.Flatten("CHW"), cnn.graph[-1]))
    assert torch_model.memory_format(mlp, "cpu", None) == "NCHW"
    # a Conv2D only inside a residual branch still counts
    res = get_workload("resnet50")
    assert torch_model.memory_format(res, "cpu", None) == "NHWC"
    with pytest.raises(BackendError, match="layout must be one of NCHW, NHWC, got 'nhwc'"):
        torch_model.memory_format(cnn, "cpu", "nhwc")


def test_summary_is_the_native_module():
    text = _model("gru", dtype="float32")[1].summary()
    assert "Embedding(30000, 125)" in text and "GRU(125, 100, batch_first=True)" in text
    text = _model("resnet50", dtype="float32", size=32)[1].summary()
    assert "Conv2d(3, 64, kernel_size=(7, 7)" in text and "Residual(" in text


@pytest.mark.parametrize("n", [1, 2])
def test_threads_are_read_back_from_torch(n):
    before = torch.get_num_threads()
    try:
        rt = runtime_for(tb, threads=n)
        assert rt.threads == n and torch.get_num_threads() == n  # inside torch, not the request
        w = get_workload("gru")
        man = make(tb, w, canonical_weights(w), threads=n).manifest()
        assert man["threads"] == n and type(man["threads"]) is int
        assert man["tf32"] is False and man["precision"] == "fp32"
    finally:
        torch.set_num_threads(before)


def test_tf32_stays_off_on_the_cpu():
    from rosetta.backends.torch import runtime as settings

    assert settings.set_tf32(False, "cpu") is False
    assert settings.set_tf32(True, "cpu") is False  # CUDA only: read back off
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32


def _after_one_step(model, p0, batch):
    model.set_params(p0)
    model.train_step(batch)
    return model.get_params()


def test_dropout_off_makes_the_timed_step_deterministic_and_on_does_not():
    w, model = _model("cnn", dtype="float32")
    p0 = canonical_weights(w)
    x, y = gate_batch(w, n=4)
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    model.set_dropout(False)
    a, b = _after_one_step(model, p0, batch), _after_one_step(model, p0, batch)
    for n in p0:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    model.set_dropout(True)
    c, d = _after_one_step(model, p0, batch), _after_one_step(model, p0, batch)
    assert not np.array_equal(c["conv1.kernel"], d["conv1.kernel"])  # fresh masks each step
    assert not np.array_equal(a["conv1.kernel"], c["conv1.kernel"])
    assert all(m.rate.item() == m.spec_rate for m in model.dropouts) and len(model.dropouts) == 3


class CountingBackend:
    """A ``torch.compile`` backend that counts the graphs dynamo hands it and runs them as is."""

    __name__ = "counting"

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def test_toggling_dropout_neither_retraces_nor_recompiles():
    counter = CountingBackend()
    w, model = _model("cnn", dtype="float32", compile=counter)
    assert model.manifest()["compile"] == "torch.compile (backend=counting)"
    x, y = gate_batch(w, n=4)
    batch = next(iter(model.loader(x, y, np.arange(4), 4)))
    for enabled in (True, False, True, False):
        model.set_dropout(enabled)
        model.train_step(batch)
    assert counter.graphs == 1


def test_the_compile_count_sees_a_dropout_rate_that_is_a_python_float():
    # planted defect: nn.Dropout's p is a constant dynamo specialises on, so toggling it
    # compiles a second graph; the test above would fail on such a gate
    torch._dynamo.reset()
    counter = CountingBackend()
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    step = torch.compile(net, backend=counter)
    x = torch.ones(2, 4)
    for p in (0.5, 0.0, 0.5, 0.0):
        net[1].p = p
        step(x)
    assert counter.graphs >= 2
    gated = torch.nn.Sequential(torch.nn.Linear(4, 4), GatedDropout(0.5)).train()
    counter2 = CountingBackend()
    step2 = torch.compile(gated, backend=counter2)
    for p in (0.5, 0.0, 0.5, 0.0):
        gated[1].set_rate(p)
        step2(x)
    assert counter2.graphs == 1


@pytest.mark.parametrize("name,size", [("cnn", None), ("gru", None), ("resnet50", 32)])
def test_handwritten_models_compute_what_the_lowered_ones_compute(name, size):
    # the speed benchmark compares the two; it only means something if they are the same model.
    # float64, same memory format: only oneDNN's summation order may differ (~1e-16 per op,
    # compounded over ResNet's 53 convolutions: 1e-12 measured), hence 1e-10 relative
    w, model = _model(name, size=size)
    fmt = torch.channels_last if model.layout == "NHWC" else torch.contiguous_format
    hand = hw.MODELS[name]().to(torch.float64).to(memory_format=fmt)
    hw.copy_weights(model.net, hand)
    hand.eval()
    x, _ = gate_batch(w, n=2)
    batch = next(iter(model.loader(x, None, np.arange(2), 2)))
    want = hw.features_step(hand, batch[0]).numpy()
    got = model.to_numpy(model.predict(batch))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * np.abs(want).max())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_cuda_matches_reference(name):
    w = get_workload(name)
    p = canonical_weights(w)
    model = make(tb, w, p, dtype="float32", device="cuda")  # written, not run here
    x, y = gate_batch(w, n=4)
    result = run_gate(model, w, p, x, y, "float32")
    assert result.equivalent, result.divergence
