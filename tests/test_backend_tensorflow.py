"""What the conformance suite does not cover for the TensorFlow/Keras backend: the optimisers'
semantics in float64, each weight conversion, float64 all the way through, the padding rule,
inference-mode BatchNorm, the fast-path choices (keyed by graph content), threads read back from
TensorFlow, and the dropout gate inside the timed trace.

Tolerances: the optimiser tests compare float64 updates whose only difference from the reference
is rounding order (a few ulps per step, ~1e-16 relative), so 1e-12 relative to the change's scale
leaves four orders of margin while each wrong rule tested here is off by 1e-8 or more.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make, runtime_for
from rosetta.backends.numpy_ref import optim as ref_optim
from rosetta.errors import BackendError
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.workload import SGD, Adam

if not backends.status("tensorflow").usable:
    pytest.skip(backends.status("tensorflow").reason, allow_module_level=True)

tfb = backends.load("tensorflow")
assert tfb.available()[0]  # imports its runtime.py, which selects Keras' TensorFlow backend
import keras  # noqa: E402  (after the backend selected Keras' TensorFlow backend)
import tensorflow as tf  # noqa: E402

from rosetta.backends.keras_common.ops import dense as keras_dense  # noqa: E402
from rosetta.backends.tensorflow import optim  # noqa: E402
from rosetta.backends.tensorflow import runtime as tf_runtime  # noqa: E402
from rosetta.backends.tensorflow.lowering import same_is_exact  # noqa: E402
from rosetta.backends.tensorflow.model import choose  # noqa: E402
from tests.conformance.conftest import gate_batch  # noqa: E402

RTOL = 1e-12  # float64, rounding order only (see the module docstring)


def _run_keras(opt, p0: dict, grads_per_step: list[dict]) -> dict:
    """Apply ``opt`` to float64 variables holding ``p0`` for each step's gradients."""
    names = sorted(p0)
    variables = [tf.Variable(p0[n]) for n in names]
    opt.build(variables)
    for grads in grads_per_step:
        opt.apply([tf.constant(grads[n]) for n in names], variables)
    return {n: v.numpy() for n, v in zip(names, variables, strict=True)}


def _run_ref(opt, p0: dict, grads_per_step: list[dict]) -> dict:
    params = {n: v.copy() for n, v in p0.items()}
    for grads in grads_per_step:
        opt.step(params, grads)
    return params


def _problem(seed: int, steps: int, tiny: bool = False):
    rng = np.random.default_rng(seed)
    p0 = {"a": rng.normal(size=(6, 5)), "b": rng.normal(size=(7,))}
    grads = []
    for _ in range(steps):
        g = {n: rng.normal(size=v.shape) for n, v in p0.items()}
        if tiny:  # |g| ~ eps: where Adam's epsilon placement shows
            g = {n: v * 1e-8 for n, v in g.items()}
        grads.append(g)
    return p0, grads


def _assert_same_change(got: dict, want: dict, p0: dict, rtol: float = RTOL) -> None:
    for n in p0:
        dg, dw = got[n] - p0[n], want[n] - p0[n]
        np.testing.assert_allclose(dg, dw, rtol=0, atol=rtol * np.abs(dw).max(), err_msg=n)


def test_keras_sgd_momentum_equals_spec_form_in_float64():
    spec = SGD(lr=0.01, momentum=0.9)
    p0, grads = _problem(0, steps=6)
    got = _run_keras(optim.make_optimizer(spec), p0, grads)
    assert isinstance(optim.make_optimizer(spec), keras.optimizers.SGD)  # Keras' own rule
    want = _run_ref(ref_optim.SGD(lr=0.01, momentum=0.9), p0, grads)
    _assert_same_change(got, want, p0)


def test_python_float_hyperparameters_would_be_rounded_through_float32():
    # why optim.py passes float64 scalars: Keras' SGD given Python floats updates a float64
    # model with float32-rounded lr and momentum, ~1e-8 off: the test above would fail
    p0, grads = _problem(0, steps=6)
    plain = _run_keras(keras.optimizers.SGD(learning_rate=0.01, momentum=0.9), p0, grads)
    want = _run_ref(ref_optim.SGD(lr=0.01, momentum=0.9), p0, grads)
    with pytest.raises(AssertionError):
        _assert_same_change(plain, want, p0, rtol=1e-9)


@pytest.mark.parametrize("tiny", [False, True], ids=["ordinary", "grad~eps"])
def test_spec_adam_is_algorithm_1_in_float64(tiny):
    spec = Adam(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    p0, grads = _problem(1, steps=5, tiny=tiny)
    got = _run_keras(optim.make_optimizer(spec), p0, grads)
    want = _run_ref(ref_optim.Adam(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8), p0, grads)
    _assert_same_change(got, want, p0)


def test_keras_adam_places_epsilon_elsewhere():
    # the deviation SpecAdam exists for: visible where |g| ~ eps (relative 1e-3 here)
    p0, grads = _problem(1, steps=5, tiny=True)
    keras_adam = keras.optimizers.Adam(
        learning_rate=lambda: np.float64(1e-3), beta_1=0.9, beta_2=0.999, epsilon=1e-8
    )
    got = _run_keras(keras_adam, p0, grads)
    want = _run_ref(ref_optim.Adam(lr=1e-3), p0, grads)
    with pytest.raises(AssertionError):
        _assert_same_change(got, want, p0, rtol=1e-6)


def test_spec_adam_is_dense_for_sparse_embedding_gradients():
    # rows touched on step 1 but not step 2 still move on step 2 (the reference is dense Adam)
    rng = np.random.default_rng(2)
    table = rng.normal(size=(10, 4))
    rows = [np.array([1, 3, 3]), np.array([5, 7])]  # step 1, step 2 (3 repeated: summed)
    values = [rng.normal(size=(len(r), 4)) for r in rows]
    var = tf.Variable(table)
    opt = optim.make_optimizer(Adam(lr=1e-3))
    opt.build([var])
    ref = {"t": table.copy()}
    ref_opt = ref_optim.Adam(lr=1e-3)
    for r, v in zip(rows, values, strict=True):
        opt.apply([tf.IndexedSlices(tf.constant(v), tf.constant(r), tf.constant([10, 4]))], [var])
        dense = np.zeros_like(table)
        np.add.at(dense, r, v)
        ref_opt.step(ref, {"t": dense})
    _assert_same_change({"t": var.numpy()}, ref, {"t": table})


def test_fc1_rows_follow_the_nhwc_flatten():
    w = get_workload("cnn")
    params = canonical_weights(w, 0)
    model = make(tfb, w, params, dtype="float32")
    native = model.net.get_layer("fc1").kernel.numpy()
    c, h, wd = 100, 8, 8
    canon = params["fc1.kernel"]
    for hh, ww, cc in [(0, 0, 0), (0, 0, 1), (3, 5, 42), (7, 7, 99)]:
        np.testing.assert_array_equal(
            native[(hh * wd + ww) * c + cc], canon[cc * h * wd + hh * wd + ww]
        )
    conv = model.net.get_layer("conv2").kernel.numpy()  # OIHW -> HWIO
    np.testing.assert_array_equal(conv[2, 1, 7, 31], params["conv2.kernel"][31, 7, 2, 1])


def test_flatten_conversion_inverts():
    rng = np.random.default_rng(0)
    k = rng.normal(size=(2 * 3 * 4, 5))
    native = keras_dense.chw_rows_to_hwc((2, 3, 4))(k)[0]
    assert not np.array_equal(native, k)
    np.testing.assert_array_equal(keras_dense.hwc_rows_to_chw((2, 3, 4))(native)[0], k)


def test_gru_bias_rows_and_gate_order():
    w = get_workload("gru")
    params = canonical_weights(w, 3)
    params["gru.bias_input"] = np.arange(300, dtype=np.float32)
    params["gru.bias_recurrent"] = -np.arange(300, dtype=np.float32)
    model = make(tfb, w, params, dtype="float32")
    cell = model.net.get_layer("gru").cell
    assert cell.reset_after and cell.bias.shape == (2, 300)
    np.testing.assert_array_equal(cell.bias.numpy()[0], params["gru.bias_input"])
    np.testing.assert_array_equal(cell.bias.numpy()[1], params["gru.bias_recurrent"])
    np.testing.assert_array_equal(cell.kernel.numpy(), params["gru.kernel"])  # z|r|h both


def test_batchnorm_statistics_and_inference_mode():
    w = get_workload("resnet50").at_image_size(32)
    params = canonical_weights(w, 0)
    model = make(tfb, w, params, dtype="float32")
    bn = model.net.get_layer("layer1.0.bn2")
    np.testing.assert_array_equal(bn.moving_mean.numpy(), params["layer1.0.bn2.mean"])
    np.testing.assert_array_equal(bn.moving_variance.numpy(), params["layer1.0.bn2.var"])
    x = tf.constant(np.random.default_rng(0).random((2, 32, 32, 3), dtype=np.float32))
    np.testing.assert_array_equal(model.net(x, training=True), model.net(x, training=False))


@pytest.mark.parametrize("name", ["cnn", "gru"])
def test_float64_all_the_way_through(name):
    w = get_workload(name)
    model = make(tfb, w, canonical_weights(w, 0), dtype="float64")
    for layer in model.net.layers[1:]:
        assert layer.compute_dtype == "float64", layer.name
        for v in layer.weights:
            assert v.dtype == "float64", f"{layer.name}.{v.name}"
    assert model.net.get_layer("gru" if name == "gru" else "fc2").output.dtype == "float64"
    for v in model.optimizer.variables[1:]:  # [0] is the iteration counter
        assert v.dtype == "float64", v.name


def test_a_request_is_the_loader_s_batch_without_its_pipeline():
    """``request_batch`` (the serving path's: no ``tf.data`` pipeline per request, which cost
    ~25 ms a call) gives the loader's very batch: NCHW -> NHWC, the model's dtype."""
    w = get_workload("cnn")
    model = make(tfb, w, canonical_weights(w, 0), dtype="float64")
    x = np.random.default_rng(0).random((3, *w.input.shape), dtype=np.float32)
    (want,) = next(iter(model.loader(x, None, np.arange(3), 3)))
    (got,) = model.request_batch(x)
    assert got.dtype == want.dtype == tf.float64 and got.shape == (3, 32, 32, 3)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize(
    "kernel,stride,padding,size,exact",
    [
        ((3, 3), (1, 1), (1, 1, 1, 1), 32, True),  # the CNN's convs: "same" is exact
        ((3, 3), (2, 2), (1, 1, 1, 1), 56, False),  # ResNet stride-2 3x3: "same" pads (0, 1)
        ((7, 7), (2, 2), (3, 3, 3, 3), 224, False),  # ResNet stem: "same" pads (2, 3)
        ((3, 3), (2, 2), (1, 1, 1, 1), 9, True),  # odd size: (1, 1)
        ((1, 1), (1, 1), (0, 0, 0, 0), 7, True),
    ],
)
def test_same_padding_only_where_exact(kernel, stride, padding, size, exact):
    assert same_is_exact(kernel, stride, padding, (size, size)) is exact


def test_fast_path_choices_in_manifest():
    cnn, gru = get_workload("cnn"), get_workload("gru")
    m_cnn = make(tfb, cnn, canonical_weights(cnn, 0)).manifest()
    m_gru = make(tfb, gru, canonical_weights(gru, 0)).manifest()
    assert m_cnn["layout"] == "NHWC" and m_cnn["compile"] == "tf.function"
    assert m_gru["layout"] == "NTC" and m_gru["compile"] == "tf.function+xla"
    assert m_gru["fused_rnn"].startswith("no") and "Algorithm 1" in m_gru["optimizer"]
    assert "keras.optimizers.SGD" in m_cnn["optimizer"]
    assert "train_step" in m_cnn["gated_program"] and "tf.Variable" in m_cnn["gated_program"]
    resnet = get_workload("resnet50").at_image_size(32)
    m_resnet = make(tfb, resnet, canonical_weights(resnet, 0)).manifest()
    assert "predict" in m_resnet["gated_program"] and m_resnet["fused_rnn"] == "n/a"


def test_fast_path_follows_the_graph_not_the_name():
    # a choice keyed by workload name fails here: the names are swapped, the graphs are not
    cnn, gru = get_workload("cnn"), get_workload("gru")
    cnn_named_gru = dataclasses.replace(cnn, name="gru")
    gru_named_cnn = dataclasses.replace(gru, name="cnn")
    assert choose(cnn_named_gru, "cpu").jit_compile is False
    assert choose(gru_named_cnn, "cpu").jit_compile is True
    assert "GRU" in choose(gru_named_cnn, "cpu").why_jit
    assert choose(gru_named_cnn, "cuda").jit_compile is False  # cuDNN's fused GRU instead
    assert choose(cnn_named_gru, "cuda").data_format == "channels_first"


def _cnn_batch(model, n: int = 8):
    x = np.random.default_rng(0).random((n, 3, 32, 32), dtype=np.float32)
    y = np.arange(n) % 10
    return x, y, next(iter(model.loader(x, y, np.arange(n), n)))


def _two_steps_from_one_state(model, batch) -> tuple[dict, dict]:
    """Parameters after one train_step, twice from the same parameters and optimiser state."""
    start = model.get_params()
    model.train_step(batch)
    first = model.get_params()
    model.set_params(start)  # also resets the optimiser state
    model.train_step(batch)
    return first, model.get_params()


def test_dropout_gate_makes_train_step_deterministic_and_only_then():
    w = get_workload("cnn")
    model = make(tfb, w, canonical_weights(w, 0))
    _, _, batch = _cnn_batch(model)
    model.set_dropout(False)
    a, b = _two_steps_from_one_state(model, batch)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    model.set_dropout(True)  # the seed generator moved on: another mask, other parameters
    a, b = _two_steps_from_one_state(model, batch)
    assert not np.array_equal(a["fc1.kernel"], b["fc1.kernel"])


def test_toggling_dropout_does_not_retrace_the_timed_step():
    w = get_workload("cnn")
    model = make(tfb, w, canonical_weights(w, 0))
    x, y, batch = _cnn_batch(model)
    model.train_step(batch)
    assert model.tracing_count() == 1
    for enabled in (False, True, False, True):
        model.set_dropout(enabled)
        model.train_step(batch)
    model.deterministic_steps(x[:4], y[:4], 2)  # the gate: k steps through train_step itself,
    assert model.tracing_count() == 1  # on a smaller batch, in the same trace


def test_deterministic_steps_run_the_timed_trace_with_dropout_off():
    # independent answer: the same steps through train_step with the gate off by hand
    w = get_workload("cnn")
    params = canonical_weights(w, 0)
    a, b = make(tfb, w, params), make(tfb, w, params)
    x, y, batch = _cnn_batch(a)
    got = a.deterministic_steps(x, y, 2)
    b.set_dropout(False)
    b.train_step(batch)
    b.train_step(batch)
    want = b.get_params()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    with_dropout = make(tfb, w, params)
    with_dropout.train_step(batch)
    with_dropout.train_step(batch)
    assert not np.array_equal(with_dropout.get_params()["fc1.kernel"], want["fc1.kernel"])


def test_threads_are_read_back_from_tensorflow():
    rt = runtime_for(tfb, threads=1)
    assert rt.threads == 1
    w = get_workload("gru")
    model = make(tfb, w, canonical_weights(w, 0), threads=1)
    model.predict(next(iter(model.loader(np.ones((2, 150), np.int32), None, np.arange(2), 2))))
    # the pools TensorFlow's started context holds, not an echo of the request
    assert tf.config.threading.get_intra_op_parallelism_threads() == 1
    assert tf.config.threading.get_inter_op_parallelism_threads() == 1
    man = model.manifest()
    assert man["threads"] == 1 and man["intra_op_threads"] == man["inter_op_threads"] == 1
    assert runtime_for(tfb, threads=2).threads == 2  # another count: the context restarts
    assert tf_runtime.threads() == (2, 2)


def test_tf32_is_off_on_the_cpu():
    assert runtime_for(tfb).tf32 is False
    assert tf_runtime.set_tf32(False, "cpu") is False
    assert tf.config.experimental.tensor_float_32_execution_enabled() is False


def test_cuda_without_gpu_is_a_clear_error():
    assert tfb.cuda_available() is False
    with pytest.raises(BackendError, match="--device cuda asked for"):
        runtime_for(tfb, device="cuda")


def test_summary_is_the_keras_summary():
    w = get_workload("cnn")
    text = make(tfb, w, canonical_weights(w, 0)).summary()
    assert "rosetta_cnn" in text and "Conv2D" in text and "fc1" in text and "Total params" in text


# --------------------------------------------------------------------------- hand-written models


@contextlib.contextmanager
def _keras_floatx(dtype: str):
    """Keras layers built inside take ``dtype`` (its float type and its cached global policy)."""
    floatx, policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx(dtype)
    keras.config.set_dtype_policy(dtype)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)
        keras.config.set_floatx(floatx)


def _hand_written(name: str, size: int | None, params: dict | None = None):
    """The lowered model and the hand-written one (float64, the lowered weights copied)."""
    from benchmarks.handwritten import tensorflow_models as hw

    w = get_workload(name)
    w = w.at_image_size(size) if size else w
    model = make(tfb, w, params or canonical_weights(w), dtype="float64")
    with _keras_floatx("float64"):
        hand = hw.make(name, size or 224, jit_compile=model.fast.jit_compile)
    hw.copy_weights(model.net, hand)
    return w, model, hand


@pytest.mark.parametrize(
    "name,size,rtol",
    [
        ("cnn", None, 1e-10),
        # slow: XLA compiles both GRU predicts (1.2-2 s); two ResNet builds (~5 s)
        pytest.param("gru", None, 1e-10, marks=pytest.mark.slow),
        pytest.param("resnet50", 32, 1e-10, marks=pytest.mark.slow),
        ("transformer", None, 1e-7),
    ],
)
def test_handwritten_models_compute_what_the_lowered_ones_compute(name, size, rtol):
    """The speed benchmark (``benchmarks/lowering_tensorflow.py``) compares the two; it only
    means something if they are the same model. float64, inference mode: the same Keras layers
    on both sides, so only summation order may differ (~1e-16 per op, compounded over ResNet's
    53 convolutions), hence 1e-10 relative. The transformer's bound is 1e-7: the hand-written
    one's ``Dense(activation="gelu")`` is ``tf.nn.gelu``, whose sqrt 2 is a float32 constant
    (1.7e-8 relative in erf's argument; 6e-9 measured at the logits, 4e-16 with it written in
    float64, as the lowered ``ExactGELU`` does), while the tanh form moves them by 1.9e-4
    (planted, measured) and a missing key mask or Keras' default LayerNorm epsilon by far more.
    A row of padding only pools to 0 on both sides (additive -1e9 mask against the lowered
    -inf select)."""
    w, model, hand = _hand_written(name, size)
    x, _ = gate_batch(w, n=3)
    if name == "transformer":
        x[2] = 0  # a review of padding only
    batch = next(iter(model.loader(x, None, np.arange(3), 3)))
    want = model.to_numpy(model.predict(batch))
    got = hand.predict_on_batch(batch[0])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2 * np.abs(want).max())


def test_handwritten_transformer_decays_the_specs_kernels_by_lr_times_decay():
    """Keras' AdamW with ``exclude_from_weight_decay`` decays what the spec decays: one update
    with zero gradients moves no parameter through Adam (m = v = 0), so what changes is the
    decay alone, ``w -= lr * wd * w``. The changed variables are named through their values
    (the canonical weights offset by distinct random amounts, so every tensor is unique and
    none is 0) and must be exactly the spec's decay set (the attention, MLP and fc kernels, not
    the tables, biases or LayerNorm). Each moves by lr * wd = 1e-5 of itself to 1e-6 relative
    (Keras keeps lr and wd as float32, 5e-8 off); a decay left unscaled by lr is 1000x off."""
    w = get_workload("transformer")
    rng = np.random.default_rng(1)
    params = {
        k: v + rng.uniform(0.01, 0.02, v.shape).astype(v.dtype)
        for k, v in canonical_weights(w).items()
    }
    _, _, hand = _hand_written("transformer", None, params)
    variables = hand.trainable_variables
    before = [v.numpy().copy() for v in variables]
    hand.optimizer.apply([tf.zeros_like(v) for v in variables], variables)
    decayed = set()
    for v, b in zip(variables, before, strict=True):
        change = b - v.numpy()
        if np.any(change):
            (key,) = [k for k, p in params.items() if p.shape == b.shape and np.array_equal(p, b)]
            decayed.add(key)
            np.testing.assert_allclose(change, 1e-3 * 0.01 * b, rtol=1e-6)
    assert decayed == {k for k in params if w.optimizer.decays(k)}
