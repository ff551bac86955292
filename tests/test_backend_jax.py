"""JAX-specific checks the conformance suite does not make: optax against the spec's optimiser
rules in float64, the layout conversions, the custom gradients of the lowering, ReLU's gradient
at 0, the float64 flag's containment, the compile cache, dropout switched inside the timed
program without recompiling, the prefetching loader, threads, TF32 and devices.

Tolerances: float64 comparisons of the same arithmetic in another order use 1e-12 relative
(rounding of a few hundred float64 operations is ~1e-14); bit-identity is asserted where the
same program must run (the x64 containment, dropout off)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rosetta import backends

if not backends.status("jax").usable:
    pytest.skip(f"jax: {backends.status('jax').reason}", allow_module_level=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rosetta.backends import cores, make, numpy_ref, runtime_for  # noqa: E402
from rosetta.backends import jax as jb  # noqa: E402
from rosetta.backends.driver import lower_op  # noqa: E402
from rosetta.backends.jax import loader, lowering, optim, runtime  # noqa: E402
from rosetta.backends.numpy_ref import optim as ref_optim  # noqa: E402
from rosetta.errors import BackendError  # noqa: E402
from rosetta.runner.gate import run_gate  # noqa: E402
from rosetta.spec import canonical_weights, get_workload, ops  # noqa: E402
from rosetta.spec.probes import probe_batch, probe_workload  # noqa: E402


def tiny_cnn():
    """The cnn spec's op kinds with few channels (fast to compile): conv-relu-pool-flatten-dense."""
    w = get_workload("cnn")
    conv, dense = w.graph[0], w.graph[-1]
    graph = (
        dataclasses.replace(conv, name="c1", out_channels=4),
        ops.ReLU(),
        ops.MaxPool2D((2, 2), (2, 2), (0, 0, 0, 0)),
        ops.Dropout(0.25),
        ops.Flatten("CHW"),
        dataclasses.replace(dense, name="fc", units=10),
    )
    return dataclasses.replace(w, graph=graph)


def images(n, seed=0, shape=(3, 32, 32)):
    return np.random.default_rng(seed).random((n, *shape), dtype=np.float32)


# -- optimisers: optax against numpy_ref.optim, float64 -----------------------------------------


def _optax_steps(workload, params, grads_seq):
    tx, _ = optim.make_optimizer(workload)
    with jax.enable_x64(True):
        p = {k: jnp.asarray(v) for k, v in params.items()}
        state = tx.init(p)
        for g in grads_seq:
            updates, state = tx.update({k: jnp.asarray(v) for k, v in g.items()}, state, p)
            p = jax.tree.map(lambda a, u: a + u, p, updates)
        return {k: np.asarray(v) for k, v in p.items()}


def _reference_steps(opt, params, grads_seq):
    p = {k: v.copy() for k, v in params.items()}
    for g in grads_seq:
        opt.step(p, g)
    return p


@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_optax_rule_is_the_spec_rule_in_float64(name):
    w = get_workload(name)
    rng = np.random.default_rng(0)
    params = {"a": rng.normal(size=(5, 7)), "b": rng.normal(size=(7,))}

    # gradients spanning 1e-10 .. 1: Adam's epsilon placement only shows where |g| ~ eps
    def grad(v):
        return rng.normal(size=v.shape) * 10.0 ** rng.integers(-10, 1, size=v.shape)

    grads = [{k: grad(v) for k, v in params.items()} for _ in range(5)]
    o = w.optimizer
    ref = (
        ref_optim.SGD(o.lr, o.momentum, o.nesterov)
        if name == "cnn"
        else ref_optim.Adam(o.lr, o.beta1, o.beta2, o.eps)
    )
    want = _reference_steps(ref, params, grads)
    got = _optax_steps(w, params, grads)
    for k in params:
        change, want_change = got[k] - params[k], want[k] - params[k]
        np.testing.assert_allclose(change, want_change, rtol=1e-12, atol=1e-15, err_msg=k)


def test_adam_epsilon_placement_would_be_caught():
    # Keras/Chainer's placement (eps * sqrt(1 - beta2**t)) against the same gradients: the
    # float64 check above must be able to fail, so the two rules must differ beyond 1e-12 here
    w = get_workload("gru")
    o = w.optimizer
    p = {"a": np.zeros(4)}
    grads = [{"a": np.array([1e-9, 1e-8, 1e-7, 1.0])}]
    got = _optax_steps(w, p, grads)["a"]
    t = 1
    m = (1 - o.beta1) * grads[0]["a"]
    v = (1 - o.beta2) * grads[0]["a"] ** 2
    lr_t = o.lr * np.sqrt(1 - o.beta2**t) / (1 - o.beta1**t)
    keras = -lr_t * m / (np.sqrt(v) + o.eps)
    assert np.max(np.abs(got - keras) / np.abs(keras)) > 1e-3


# -- layouts --------------------------------------------------------------------------------


@pytest.mark.slow  # a layout path beyond the probes' (quick-tier budget)
@pytest.mark.parametrize("probe", [("concat", 0), ("concat", 1), ("concat", 2), ("add", 1)])
def test_wired_graphs_in_nchw_match_the_reference(probe):
    """The conformance suite runs the graph probes in NHWC; NCHW maps a concat's axis the other
    way (channels axis 1) and flattens channel-major without a transpose."""
    w = probe_workload(*probe)
    params = canonical_weights(w, 0)
    x, y = probe_batch(w)
    model = make(jb, w, params, dtype="float64", layout="NCHW")
    assert run_gate(model, w, params, x, y, "float64").equivalent


@pytest.mark.slow  # a layout path beyond the probes' (quick-tier budget)
@pytest.mark.parametrize("axis", [0, 1])
def test_a_time_major_concat_matches_the_reference(axis):
    """With a GRU and no batch-major op the embedded sequence runs time-major (T, N, E): a
    concat of time (axis 0) joins native axis 0, of features (axis 1) axis 2."""
    embedding, gru, head = probe_workload("gru", 0).graph
    graph = ops.Graph((embedding, ops.GELU("erf"), ops.Concat(axis), gru, head),
                      ((-1,), (0,), (0, 1), (2,), (3,)), ("s", "g", "", "", ""))  # fmt: skip
    w = dataclasses.replace(probe_workload("gru", 0), graph=(graph,))
    params = canonical_weights(w, 0)
    x, y = probe_batch(w)
    model = make(jb, w, params, dtype="float64")
    assert model._ctx.time_major
    assert run_gate(model, w, params, x, y, "float64").equivalent


@pytest.mark.slow  # a layout path beyond the probes' (quick-tier budget)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_softmax_over_an_images_width_in_either_layout(layout):
    """The spec's last axis of (C, H, W) is W: native axis 2 in NHWC (not the last, the
    channels), 3 in NCHW."""
    w = probe_workload("softmax", 2)
    params = canonical_weights(w, 0)
    x, y = probe_batch(w)
    model = make(jb, w, params, dtype="float64", layout=layout)
    assert run_gate(model, w, params, x, y, "float64").equivalent


@pytest.mark.slow  # a layout path beyond the probes' (quick-tier budget)
def test_a_time_major_softmax_matches_the_reference():
    """Before a GRU the embedded sequence runs time-major (T, N, E): the softmax is over E, the
    native last axis, not over time."""
    embedding, gru, head = probe_workload("gru", 0).graph
    w = dataclasses.replace(probe_workload("gru", 0), graph=(embedding, ops.Softmax(), gru, head))
    params = canonical_weights(w, 0)
    x, y = probe_batch(w)
    model = make(jb, w, params, dtype="float64")
    assert model._ctx.time_major
    assert run_gate(model, w, params, x, y, "float64").equivalent


def test_nhwc_and_nchw_compute_the_same_function_float64():
    # the NHWC model permutes fc's rows at set_params; NCHW flattens channel-major as the spec
    w = tiny_cnn()
    params = canonical_weights(w, seed=3)
    x = images(3, seed=1)
    nhwc = make(jb, w, params, dtype="float64", layout="NHWC")
    nchw = make(jb, w, params, dtype="float64", layout="NCHW")
    ref = make(numpy_ref, w, params, dtype="float64").predict_numpy(x)
    np.testing.assert_allclose(nhwc.predict_numpy(x), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(nchw.predict_numpy(x), ref, rtol=1e-12, atol=1e-14)


def test_native_parameter_layouts():
    w = tiny_cnn()
    params = canonical_weights(w, seed=3)
    m = make(jb, w, params, layout="NHWC")
    k = np.asarray(m._tp["c1.kernel"])  # (KH, KW, I, O)
    np.testing.assert_array_equal(k, params["c1.kernel"].transpose(2, 3, 1, 0))
    fc = np.asarray(m._tp["fc.kernel"])  # rows in (H, W, C) order of the NHWC flatten
    c, h, wd = 4, 16, 16
    row_hwc = (5 * wd + 7) * c + 2  # pixel (5, 7), channel 2
    row_chw = 2 * h * wd + 5 * wd + 7
    np.testing.assert_array_equal(fc[row_hwc], params["fc.kernel"][row_chw])


def test_bad_fast_path_option_is_one_clear_error():
    with pytest.raises(BackendError, match=r"layout='NWHC'; valid: NHWC, NCHW"):
        make(jb, tiny_cnn(), canonical_weights(tiny_cnn()), layout="NWHC")


# -- the lowering's gradients ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel,stride,padding",
    [
        ((3, 3), (1, 1), (1, 1, 1, 1)),
        ((7, 7), (2, 2), (3, 3, 3, 3)),
        ((3, 2), (2, 1), (0, 1, 2, 0)),
    ],
)
def test_gemm_kernel_gradient_equals_xla_convolution_gradient(kernel, stride, padding):
    op = ops.Conv2D("c", 5, kernel, stride, padding, False, {})
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        x = jnp.asarray(rng.normal(size=(2, 9, 8, 3)))
        w = jnp.asarray(rng.normal(size=(*kernel, 3, 5)))
        grads = {}
        for mode in ("xla", "gemm"):
            ctx = lowering.Ctx("NHWC", jnp.float64, conv_weight_grad=mode)
            conv = lower_op(lowering.TABLE, op, (3, 9, 8), ctx)

            def loss(w_, x_, conv=conv):
                y = conv({"c.kernel": w_}, x_, lowering.Run(False))
                return jnp.sum(jnp.sin(y))  # a non-trivial output gradient

            grads[mode] = jax.grad(loss, argnums=(0, 1))(w, x)
    for got, want in zip(grads["gemm"], grads["xla"], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


def _black_batch_grads(model_backend, w, params):
    x = np.zeros((2, *w.input.shape), dtype=np.float32)  # all-black images
    y = np.array([3, 7])
    return make(model_backend, w, params, dtype="float64").loss_and_grads(x, y)


# quick-tier budget (stop 58): the slow tier runs it; relu_half_at_zero stays quick (planted)
@pytest.mark.slow
def test_relu_gradient_at_zero_is_the_references(monkeypatch):
    # All-black images through the CNN: every conv and dense output is exactly its bias, 0 at
    # the spec's zero bias init, so every ReLU sees exactly 0. The reference's gradient there is
    # 0; jnp.maximum(x, 0) gives 0.5 (XLA splits a max's gradient between tied sides), which
    # moved every conv bias's gradient off the reference's (issue 17).
    w = get_workload("cnn")
    params = canonical_weights(w, seed=0)
    want_loss, want = _black_batch_grads(numpy_ref, w, params)
    got_loss, got = _black_batch_grads(jb, w, params)
    assert got_loss == pytest.approx(want_loss, rel=1e-12)
    # float64, the spec's gradient tolerance is 1e-8 of each tensor's scale; the conv biases'
    # reference gradients are exactly 0 here, so any leak through a ReLU shows absolutely
    for name in ("conv1.bias", "conv2.bias", "conv3.bias", "conv4.bias", "fc1.bias"):
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-12, err_msg=name)
    # the planted defect: the old lowering fails this very comparison
    old = dict(lowering.TABLE.entries)
    old[ops.ReLU] = lambda op, site, ctx: lambda p, x, run: jnp.maximum(x, 0)
    monkeypatch.setattr(lowering, "TABLE", dataclasses.replace(lowering.TABLE, entries=old))
    _, bad = _black_batch_grads(jb, w, params)
    assert np.max(np.abs(bad["conv1.bias"] - want["conv1.bias"])) > 1e-6


# -- float64 containment, compile cache, dropout keys ------------------------------------------


def test_float64_models_leave_float32_models_unchanged():
    w = tiny_cnn()
    params = canonical_weights(w, seed=2)
    x = images(4, seed=2)
    f32 = make(jb, w, params, dtype="float32")
    before = f32.predict_numpy(x)
    f64 = make(jb, w, params, dtype="float64")
    out64 = f64.predict_numpy(x)
    assert out64.dtype == np.float64 and not jax.config.jax_enable_x64  # flag back off
    after = f32.predict_numpy(x)
    with jax.enable_x64(True):  # even with the flag on around it, a float32 model stays float32
        inside = f32.predict_numpy(x)
    assert before.dtype == after.dtype == inside.dtype == np.float32
    np.testing.assert_array_equal(after, before)
    np.testing.assert_array_equal(inside, before)


def test_steady_steps_hit_the_compile_cache():
    w = tiny_cnn()
    m = make(jb, w, canonical_weights(w), dtype="float32")
    x, y = images(16), np.arange(16) % 10
    batches = list(m.loader(x, y, np.arange(16), 4))
    m.train_step(batches[0])
    compiled = m.compile_count
    for b in batches[1:]:
        m.sync(m.train_step(b))
    assert m.compile_count == compiled == 1  # one program, compiled once
    m.sync(m.train_step(next(iter(m.loader(x, y, np.arange(16), 8)))))  # a new batch shape
    assert m.compile_count == 2
    assert len(m.manifest()["compile_s"]) == 2


@pytest.mark.slow  # quick-tier budget (stop 58): CI's slow tier runs it (7 s: three jit compiles)
def test_dropout_keys_come_from_the_seed_and_the_step():
    w = tiny_cnn()
    params = canonical_weights(w)
    x, y = images(8, seed=4), np.arange(8) % 10
    runs = []
    for seed in (0, 0, 1):
        m = make(jb, w, params, seed=seed)
        b = next(iter(m.loader(x, y, np.arange(8), 8)))
        runs.append([float(m.to_numpy(m.train_step(b))) for _ in range(2)])
    assert runs[0] == runs[1]  # same seed and steps: same masks, same losses
    assert runs[0] != runs[2]  # another seed: other masks
    det, _ = make(jb, w, params).loss_and_grads(x, y)  # dropout off
    assert runs[0][0] != pytest.approx(det, rel=1e-6)  # so step 0's loss had dropout on


# -- the gate runs the timed program ------------------------------------------------------------


def _two_steps_from(m, params, batch):
    """Two train_steps, each from ``params`` with a fresh optimiser: (loss, params) of each."""
    out = []
    for _ in range(2):
        m.set_params(params)
        loss = float(m.to_numpy(m.train_step(batch)))
        out.append((loss, m.get_params()))
    return out


def test_set_dropout_switches_the_timed_executable_without_recompiling():
    w = tiny_cnn()
    params = canonical_weights(w, seed=5)
    x, y = images(8, seed=5), np.arange(8) % 10
    m = make(jb, w, params, dtype="float64")
    batch = next(iter(m.loader(x, y, np.arange(8), 8)))
    m.train_step(batch)  # compile the timed program once
    compiled, traced = m.compile_count, list(m.trace_log)
    assert traced == ["train"]

    m.set_dropout(False)
    (l1, p1), (l2, p2) = _two_steps_from(m, params, batch)
    assert l1 == l2  # bit-identical: no mask drawn, though the dropout stream moved on
    for k in p1:
        np.testing.assert_array_equal(p1[k], p2[k], err_msg=k)
    m.set_params(params)
    det, _ = m.loss_and_grads(x, y)  # the evaluation-mode loss (the grads program)
    assert l1 == pytest.approx(det, rel=1e-12)  # off really is off: float64, same arithmetic

    m.set_dropout(True)
    (l3, p3), (l4, _) = _two_steps_from(m, params, batch)
    assert l3 != l4  # dropout on: each step draws new masks
    assert l3 != pytest.approx(det, rel=1e-6)
    assert not np.array_equal(p3["fc.kernel"], p1["fc.kernel"])

    # the one extra compile and trace are loss_and_grads' own program, not a second train
    assert m.compile_count == compiled + 1 and m.trace_log == [*traced, "grads"]
    assert [name[:5] for name, _ in m.compile_log] == ["train", "grads"]
    assert m.calls["train"] == 5  # every step above ran the one donated train executable


def test_deterministic_steps_run_the_train_executable():
    w = tiny_cnn()
    m = make(jb, w, canonical_weights(w))
    x, y = images(4, seed=6), np.arange(4) % 10
    m.deterministic_steps(x, y, 3)
    assert m.calls == {"train": 3} and m.trace_log == ["train"]
    assert "'train' executable" in m.manifest()["gated_program"]
    b = next(iter(m.loader(x, y, np.arange(4), 4)))
    m.train_step(b)  # the timed loop then reuses it: no compile, dropout back on
    assert m.compile_count == 1 and bool(m._dropout) is True


# -- loader, threads, TF32, devices, summary -------------------------------------------------


def test_prefetch_keeps_batches_in_flight_ahead():
    put_log = []

    def put(b):
        put_log.append(b[0])
        return b

    it = loader.prefetch(((i,) for i in range(5)), put, depth=2)
    first = next(it)
    assert first == (0,) and put_log == [0, 1, 2]  # two batches already on their way
    assert [b[0] for b in it] == [1, 2, 3, 4]


def _affinities() -> list[int]:
    return [len(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")]


@pytest.mark.whole_machine  # JAX's threads must have started on every core
@pytest.mark.skipif(len(cores.START_CORES) < 2, reason="one core: nothing to pin")
def test_threads_one_reads_back_one_from_every_jax_thread():
    # JAX's client (and XLA's pool threads) started earlier in this process with all cores:
    # set_threads must pin those threads too, or one thread would be a claim, not a fact
    all_cores = len(cores.START_CORES)
    try:
        rt = runtime_for(jb, threads=1)
        assert rt.threads == 1
        m = make(jb, tiny_cnn(), canonical_weights(tiny_cnn()), threads=1)
        m.predict_numpy(images(2))
        assert m.manifest()["threads"] == 1 and m.manifest()["threads_pinned"] is True
        assert max(_affinities()) == 1  # every thread of the process, XLA's included
    finally:
        assert runtime_for(jb, threads=all_cores).threads == all_cores  # widened back
    assert max(_affinities()) == all_cores


def test_threads_are_set_before_jax_starts_its_cpu_client():
    code = (
        "import json, os\n"
        "from rosetta.backends import jax as jb\n"
        "from rosetta.backends.jax import runtime as rt\n"
        "from rosetta.runtime import Runtime\n"
        "before = rt.clients_started()\n"
        "r = jb.configure(Runtime.request('jax', threads=1))\n"
        "import jax.numpy as jnp\n"
        "float(jnp.ones((64, 64)).sum())\n"
        "tasks = [len(os.sched_getaffinity(int(t))) for t in os.listdir('/proc/self/task')]\n"
        "print(json.dumps([before, r.threads, os.environ['XLA_FLAGS'], max(tasks),"
        " rt.settings().note]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop("XLA_FLAGS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    before, threads, flags, widest, note = json.loads(out.stdout.strip().splitlines()[-1])
    assert before is False  # importing the backend and jax started no client
    assert threads == 1 and widest == 1
    assert runtime.EIGEN_OFF in flags and note == ""  # in XLA_FLAGS before the client read them


def test_tf32_is_read_back_from_jax_config():
    try:
        assert runtime.set_tf32(False, "cuda") is False
        assert jax.config.jax_default_matmul_precision == "highest"
        assert runtime.set_tf32(True, "cpu") is False  # no TF32 on the CPU
        # (written for CUDA, not run: only the config is checked here)
        assert runtime.set_tf32(True, "cuda") is True
        assert jax.config.jax_default_matmul_precision == "tensorfloat32"
    finally:
        runtime.set_tf32(False, "cpu")
    assert make(jb, tiny_cnn(), canonical_weights(tiny_cnn())).manifest()["tf32"] is False


def test_cuda_is_a_clear_error_without_a_gpu():
    if jb.cuda_available():
        pytest.skip("a CUDA GPU is visible")
    with pytest.raises(BackendError, match="jax sees no CUDA GPU"):
        runtime.jax_device("cuda")


def test_summary_names_the_native_program():
    text = make(jb, tiny_cnn(), canonical_weights(tiny_cnn())).summary()
    assert "conv_general_dilated" in text and "(3, 3, 3, 4)" in text and "OIHW->HWIO" in text
    gru = get_workload("gru")
    assert "scan" in make(jb, gru, canonical_weights(gru)).summary()


# -- the hand-written Flax baseline holds the lowered weights ------------------------------------


def _spread(params, seed=0):
    """The canonical weights with N(0, 0.1^2) noise on every tensor the spec initialises to a
    constant (biases, LayerNorm's gamma and beta): at zeros and ones a bias, scale or gate block
    mapped to the wrong leaf would compute the same function."""
    rng = np.random.default_rng(seed)
    return {
        k: v + rng.normal(0, 0.1, v.shape).astype(v.dtype) if np.ptp(v) == 0 else v
        for k, v in params.items()
    }


def _hand_inputs(w, n=3, seed=0):
    """``n`` canonical float64 images, or token ids pre-padded with zeros: a row with padding in
    front and a row of padding only (the GRU reads it; the transformer masks all of it)."""
    rng = np.random.default_rng(seed)
    if w.input.dtype != "int32":
        return rng.random((n, *w.input.shape))
    x = rng.integers(1, 30000, size=(n, *w.input.shape)).astype(np.int32)
    x[0, :100], x[1] = 0, 0
    return x


#: float64 bounds, relative to the largest output: the same arithmetic in another order
#: (measured 0 for cnn, 1.9e-16 for gru, 1.2e-15 for resnet50, two seeds) except the transformer,
#: whose Flax model calls ``jax.nn.dot_product_attention``: its softmax runs in float32 (jax
#: 0.10; the lowered model composes attention in float64), measured 2.7e-8 of the logits' scale
#: (2.6e-8 with seed 1); 2e-7 still fails AdamW decaying every tensor or none (2.7e-6, 7.8e-6
#: in the train-step test's losses)
HAND_RTOL = {"cnn": 1e-12, "gru": 1e-12, "resnet50": 1e-12, "transformer": 2e-7}


@pytest.mark.parametrize(
    "name", ["cnn", "gru", "transformer", pytest.param("resnet50", marks=pytest.mark.slow)]
)
def test_handwritten_flax_model_computes_the_lowered_function(name):
    """``benchmarks/lowering_jax.py`` times the hand-written Flax model against the lowered one;
    that means something only if it is the same function. The Flax model loads the lowered
    model's weights (``get_params``) through ``variables_from``: the conv kernels OIHW -> HWIO,
    the CNN's fc1 rows C, H, W -> H, W, C, the GRU's z | r | h blocks cut per gate, BatchNorm's
    running statistics into ``batch_stats``. float64 forward, inference mode, 3 samples (2 for
    resnet50, at 32 px); bounds in :data:`HAND_RTOL` (why there)."""
    from benchmarks.handwritten import jax_models as hw

    w = get_workload(name)
    w = w.at_image_size(32) if name == "resnet50" else w
    lowered = make(jb, w, _spread(canonical_weights(w)), dtype="float64")
    x = _hand_inputs(w, n=2 if name == "resnet50" else 3)
    want = lowered.predict_numpy(x)
    with jax.enable_x64(True):
        xn = lowered.native_input(x)
        got = np.asarray(hw.make(name, (xn,), lowered.get_params()).forward(xn))
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=HAND_RTOL[name] * np.abs(want).max())


@pytest.mark.slow  # three train programs compiled per side (quick tier: the forward above)
@pytest.mark.parametrize("name", ["cnn", "gru", "transformer"])
def test_handwritten_flax_train_steps_follow_the_lowered_ones(name):
    """The losses of three training steps, dropout off, from the same (spread) weights on the
    same batch: the first checks the training forward and loss, the next two each side's
    gradients and optimiser update (SGD with momentum, Adam, AdamW decaying the kernels only).
    float64, relative: 1e-9 (measured 0 for cnn, 1.6e-16 for gru); the transformer's float32
    softmax in Flax costs it more (measured 8e-9), :data:`HAND_RTOL`'s 2e-7."""
    from benchmarks.handwritten import jax_models as hw

    w = get_workload(name)
    lowered = make(jb, w, _spread(canonical_weights(w)), dtype="float64")
    x = _hand_inputs(w, n=4)
    y = np.array([0, 1, 1, 0])
    start = lowered.get_params()  # float64, before any step
    batch = next(iter(lowered.loader(x, y, np.arange(4), 4)))
    lowered.set_dropout(False)
    want = [float(lowered.train_step(batch)) for _ in range(3)]
    with jax.enable_x64(True):
        hand_batch = (lowered.native_input(x), y.astype(np.int32))
        prog = hw.make(name, hand_batch, start)
        state, got = prog.state, []
        for _ in range(3):
            *state, loss = prog.step_without_dropout(*state, *hand_batch)
            got.append(float(loss))
    np.testing.assert_allclose(got, want, rtol=HAND_RTOL[name] if name == "transformer" else 1e-9)


def test_lowered_weights_that_do_not_fit_the_flax_model_are_one_clear_error():
    """A tensor missing or left over, and a leaf of the wrong shape, each named in one error."""
    from benchmarks.handwritten import jax_models as hw

    params = canonical_weights(get_workload("cnn"))
    odd = {k: v for k, v in params.items() if k != "conv2.bias"}
    odd["conv5.kernel"] = params["conv4.kernel"]
    with pytest.raises(ValueError, match=r"missing \['conv2.bias'\], unused \['conv5.kernel'\]"):
        hw.variables_from("cnn", odd)
    odd = {**params, "fc2.kernel": np.zeros((512, 7), np.float32)}
    x = np.zeros((1, 32, 32, 3), np.float32)
    with pytest.raises(ValueError, match=r"Dense_1/kernel: \(512, 7\) from the lowered weights"):
        hw.make("cnn", (x,), odd)
