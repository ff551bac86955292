"""Chainer-specific checks the conformance suite does not make: the NumPy-2 compatibility layer,
every Chainer function and link Rosetta uses (float32 and float64, forward and backward, against
the NumPy reference's own ops), NStepGRU's weight order and reset convention, the optimisers'
semantics in float64, the loader's types, and the device errors.

Tolerances: float64 compares ops that differ only in summation order, so 1e-10 relative (the
reference's own float64 bound for forward passes is 1e-10); float32 one op at a time, 1e-5 of the
tensor's largest entry (a few float32 ulps accumulated over at most a few hundred products).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import driver, make, runtime_for
from rosetta.backends.base import Model
from rosetta.backends.numpy_ref import optim as ref_optim
from rosetta.backends.numpy_ref.lowering import TABLE as REF_TABLE
from rosetta.backends.numpy_ref.lowering import Ctx as RefCtx
from rosetta.errors import BackendError
from rosetta.spec import canonical_weights, get_workload, ops
from tests.conformance.conftest import gate_batch

if not backends.status("chainer").usable:
    pytest.skip("chainer is not installed", allow_module_level=True)

from rosetta.backends import chainer as cb  # noqa: E402
from rosetta.backends.chainer import compat, lowering, weights  # noqa: E402
from rosetta.backends.chainer import runtime as rt  # noqa: E402
from rosetta.backends.chainer.optim import SpecAdam  # noqa: E402

chainer = compat.load()
F = chainer.functions
CPU = rt.place("cpu")
DTYPES = ("float32", "float64")
TOL = {"float32": dict(rtol=1e-5, scale="max"), "float64": dict(rtol=1e-10, scale="elem")}


def assert_close(a, b, dtype, what):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    tol = TOL[dtype]
    ref = np.abs(b).max(initial=0.0) if tol["scale"] == "max" else np.abs(b)
    bound = tol["rtol"] * ref + 1e-30
    worst = float((np.abs(a - b) / bound).max(initial=0.0))
    assert worst <= 1.0, f"{what} ({dtype}): {worst:.3g}x over rtol {tol['rtol']}"


# --------------------------------------------------------------------------- compat layer


def test_compat_adds_nothing_to_numpy_after_the_import():
    code = (
        "import numpy as np\n"
        "from rosetta.backends.chainer import compat\n"
        "compat.load()\n"
        "import chainer.functions.array.as_strided as a, chainer.functions.array.resize_images"
        " as r\n"
        "print(hasattr(np, 'sctypes'), hasattr(np, 'float'), 'sctypes' in vars(a.np),"
        " r.compute_indices_and_weights.__globals__['numpy'].float is float, r.numpy is np,"
        " a.np.ndarray is np.ndarray)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # NumPy itself is untouched; only the two Chainer modules see the proxied names
    assert out.stdout.split() == ["False", "False", "True", "True", "True", "True"], out.stderr


def test_compat_layer_is_recorded():
    assert set(compat.applied()) == {
        "numpy.sctypes",
        "as_strided.np.sctypes",
        "resize_images.numpy.float",
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_functions_behind_the_compat_lines_run(dtype):
    # as_strided's backward reads np.sctypes['float']; resize_images builds grids with np.float
    x = chainer.Variable(np.arange(6, dtype=dtype))
    y = F.as_strided(x, (2, 2), (1, 1))  # y[i, j] = x[i + j] (strides in elements)
    F.sum(y).backward()
    np.testing.assert_array_equal(x.grad, np.array([1, 2, 1, 0, 0, 0], dtype=dtype))
    img = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)  # resize_images is float32-only
    up = F.resize_images(img, (7, 7), align_corners=True)
    np.testing.assert_allclose(up.array[0, 0, ::2, ::2], img[0, 0], rtol=1e-6)
    np.testing.assert_allclose(up.array[0, 0, 1, 1], img[0, 0, :2, :2].mean(), rtol=1e-6)


# ------------------------------------------------------------------ every op, vs the reference


class _NoInit(dict):
    """``op.init`` for ops built by hand: the test draws their values itself."""

    def __missing__(self, key):
        return None


NI = _NoInit()


def _conv(padding, bias=True):
    return ops.Conv2D("c", 4, (3, 3), (2, 2), padding, bias, NI)


OP_CASES = [
    ("conv2d", _conv((1, 1, 1, 1)), (2, 3, 9, 9)),
    ("conv2d_asym", _conv((0, 1, 2, 1), bias=False), (2, 3, 8, 8)),
    ("maxpool2x2", ops.MaxPool2D((2, 2), (2, 2), (0, 0, 0, 0)), (2, 3, 8, 8)),
    ("maxpool3x3s2p1", ops.MaxPool2D((3, 3), (2, 2), (1, 1, 1, 1)), (2, 3, 9, 9)),
    ("maxpool_asym", ops.MaxPool2D((3, 3), (2, 2), (0, 1, 1, 0)), (2, 3, 8, 8)),
    ("relu", ops.ReLU(), (2, 3, 4, 4)),
    ("dropout_eval", ops.Dropout(0.5), (2, 7)),
    ("flatten", ops.Flatten("CHW"), (2, 3, 4, 5)),
    ("dense", ops.Dense("d", 6, True, NI), (3, 10)),
    ("batchnorm", ops.BatchNorm("bn", 1e-5, 0.1, NI), (2, 3, 4, 4)),
    ("global_avgpool", ops.GlobalAvgPool(), (2, 3, 4, 5)),
    ("embedding", ops.Embedding("e", 11, 5, NI), (3, 6)),
    ("gru", ops.GRU("g", 4, ("z", "r", "h"), True, "zeros", "last", NI), (3, 6, 5)),
    (
        "residual",
        ops.Residual(
            body=(ops.Conv2D("r.c", 3, (3, 3), (1, 1), (1, 1, 1, 1), False, NI), ops.ReLU()),
            shortcut=(ops.BatchNorm("r.bn", 1e-5, 0.1, NI),),
        ),
        (2, 3, 5, 5),
    ),
]


def _random_params(op, in_shape, rng):
    params = {}
    for spec in op.param_specs(in_shape):
        v = rng.normal(size=spec.shape) * 0.5
        if spec.name.endswith(".var"):
            v = rng.uniform(0.5, 1.5, size=spec.shape)
        params[spec.name] = v
    return params


def _input(name, shape, rng):
    if name == "embedding":
        return rng.integers(0, 11, size=shape).astype(np.int32)
    if name == "gru":
        return rng.normal(size=shape)
    return rng.normal(size=shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,op,shape", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_every_lowered_op_forward_and_backward(name, op, shape, dtype):
    rng = np.random.default_rng(1)
    in_shape = shape[1:]
    params = {k: v.astype(dtype) for k, v in _random_params(op, in_shape, rng).items()}
    x = _input(name, shape, rng)
    x = x if x.dtype == np.int32 else x.astype(dtype)
    # reference: forward, then the backward of a fixed output gradient
    ref_ctx = RefCtx({k: v.astype(np.float64) for k, v in params.items()}, False, rng)
    x_ref = x.astype(np.int64) if x.dtype == np.int32 else x.astype(np.float64)
    y_ref, back = driver.lower(REF_TABLE, (op,), in_shape, None)(x_ref, ref_ctx)
    dy = rng.normal(size=y_ref.shape)
    dx_ref = back(dy)
    # Chainer: the op lowered through its table, holding the same canonical parameters
    ctx = lowering.Ctx(dtype, lowering.DropoutSwitch(rt.uniform_source(CPU, 0)))
    with chainer.using_config("dtype", np.dtype(dtype)):
        chain = driver.lower(lowering.TABLE, (op,), in_shape, ctx)
    weights.load(ctx.owners, params, dtype, CPU.device)
    if name in ("gru", "embedding"):  # sequences are time-major in the Chainer backend
        x = np.ascontiguousarray(np.swapaxes(x, 0, 1))
    xv = chainer.Variable(x) if x.dtype != np.int32 else x
    chain.cleargrads()  # a new Parameter's gradient is NaN-filled, and backward accumulates
    with rt.step_config(CPU, train=False, type_check=True):
        y = chain(xv)
        # embedding output: (T, N, E) here, (N, T, E) in the reference
        swap = (lambda a: np.swapaxes(a, 0, 1)) if name == "embedding" else (lambda a: a)
        y.grad = np.ascontiguousarray(swap(dy.astype(dtype)))
        y.backward()
    assert y.dtype == np.dtype(dtype), f"{name}: output dtype {y.dtype}"
    assert_close(swap(y.array), y_ref, dtype, f"{name} forward")
    if dx_ref is not None:
        dx = np.swapaxes(xv.grad, 0, 1) if name == "gru" else xv.grad
        assert_close(dx, dx_ref, dtype, f"{name} input gradient")
    got = weights.read(ctx.owners, grad=True)
    for pname, g in ref_ctx.grads.items():
        assert_close(got[pname], g, dtype, f"{name} gradient of {pname}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy_matches_reference(dtype):
    from rosetta.backends.numpy_ref import nn

    rng = np.random.default_rng(2)
    logits = rng.normal(size=(5, 3)) * 3
    labels = rng.integers(0, 3, size=5)
    loss_ref, cache = nn.softmax_cross_entropy_forward(logits, labels)
    v = chainer.Variable(logits.astype(dtype))
    loss = F.softmax_cross_entropy(v, labels.astype(np.int32))
    loss.backward()
    assert_close(loss.array, loss_ref, dtype, "loss")
    assert_close(v.grad, nn.softmax_cross_entropy_backward(cache), dtype, "dlogits")


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_loss_reads_a_label_per_token(dtype):
    """A language model's (N, T, K) logits and (N, T) labels: the mean over every position. With
    T == K, ``F.softmax_cross_entropy`` given them as they are reads axis 1 as the classes and
    runs without complaint (the model's steps run without its type checks): a wrong loss."""
    from rosetta.backends.chainer.model import softmax_cross_entropy
    from rosetta.backends.numpy_ref import nn

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 4, 4)) * 3  # (N, T, K), T == K
    labels = rng.integers(0, 4, size=(2, 4))
    loss_ref, cache = nn.softmax_cross_entropy_forward(logits, labels)
    v = chainer.Variable(logits.astype(dtype))
    loss = softmax_cross_entropy(v, labels.astype(np.int32))
    loss.backward()
    assert_close(loss.array, loss_ref, dtype, "loss")
    assert_close(v.grad, nn.softmax_cross_entropy_backward(cache), dtype, "dlogits")
    with chainer.using_config("type_check", False):
        unflattened = F.softmax_cross_entropy(logits.astype(dtype), labels.astype(np.int32))
    assert not np.allclose(unflattened.array, loss_ref)


@pytest.mark.parametrize(
    ("decay", "planted"), [(("kernel",), False), (("kernel", "table"), False), (("table",), True)]
)
def test_a_tied_table_is_one_parameter_updated_and_decayed_once(decay, planted, monkeypatch):
    """The tied_dense probe under AdamW in float64, the table in the decay set or not: the
    parameters after the gate's steps are the reference's (an update or a decay per use would
    move the table twice). Planted: the embedding's table left out of the decay (no
    ``decay_paths``) is seen."""
    import dataclasses

    from rosetta.backends.chainer.ops import embedding
    from rosetta.runner.gate import run_gate
    from rosetta.spec.probes import probe_batch, probe_workload
    from rosetta.spec.workload import AdamW

    if planted:
        monkeypatch.setattr(embedding, "decay_paths", lambda op: {})
    w = probe_workload("tied_dense", 0)
    w = dataclasses.replace(w, optimizer=AdamW(lr=0.01, weight_decay=0.1, decay=decay))
    params = canonical_weights(w, 0)
    model = make(cb, w, params, dtype="float64")
    named = list(model.net.namedparams())
    assert len({id(p) for _, p in named}) == len(named)  # the table registered once
    assert "probe_embedding.table" in model.get_params()
    x, y = probe_batch(w)
    result = run_gate(model, w, params, x, y, "float64")
    assert result.equivalent != planted, result.divergence


def test_maxpool_lowering_uses_cover_all_false():
    x = np.random.default_rng(0).normal(size=(1, 2, 32, 32)).astype(np.float32)
    op = ops.MaxPool2D((3, 3), (2, 2), (1, 1, 1, 1))
    got = cb.run_op(op, x, runtime_for(cb))
    assert got.shape == (1, 2, 16, 16)  # the spec's floor((32 + 2 - 3) / 2) + 1
    # Chainer's default would add a row and a column of partial windows
    assert F.max_pooling_2d(x, 3, 2, 1).shape == (1, 2, 17, 17)


# --------------------------------------------------------------------------- NStepGRU convention


def test_gru_weight_indices_follow_the_gate_names():
    h, e = 3, 2
    op = ops.GRU("g", h, ("z", "r", "h"), True, "zeros", "last", NI)
    # every gate block marked by its own constant: z -> 1, r -> 2, h -> 3 (input), +10 recurrent
    marks = {"z": 1.0, "r": 2.0, "h": 3.0}
    kernel = np.concatenate([np.full((e, h), marks[g]) for g in "zrh"], axis=1)
    rec = np.concatenate([np.full((h, h), 10 + marks[g]) for g in "zrh"], axis=1)
    bi = np.concatenate([np.full(h, 100 + marks[g]) for g in "zrh"])
    br = np.concatenate([np.full(h, 1000 + marks[g]) for g in "zrh"])
    native = weights.to_native(
        op,
        {"g.kernel": kernel, "g.recurrent_kernel": rec, "g.bias_input": bi, "g.bias_recurrent": br},
    )
    # chainer.functions.n_step_gru: W0/W3 reset gate, W1/W4 update gate, W2/W5 candidate
    for i, gate in ((0, "r"), (1, "z"), (2, "h")):
        assert np.all(native[f"rnn.0.w{i}"] == marks[gate]) and native[f"rnn.0.w{i}"].shape == (
            h,
            e,
        )
        assert np.all(native[f"rnn.0.w{i + 3}"] == 10 + marks[gate])
        assert np.all(native[f"rnn.0.b{i}"] == 100 + marks[gate])
        assert np.all(native[f"rnn.0.b{i + 3}"] == 1000 + marks[gate])


def _sig(a):
    return 1 / (1 + np.exp(-a))


def test_nstepgru_is_reset_after_with_the_recurrent_bias_inside():
    # Chainer's documented equations, written out on its native weights, must equal the link,
    # and must differ from the reset-before variant (r * h before the matmul) on the same weights
    rng = np.random.default_rng(3)
    n, t, e, h = 2, 3, 4, 5
    link = lowering.GRULast(e, h)
    with chainer.using_config("dtype", np.float64):
        link = lowering.GRULast(e, h)
    w = [getattr(link.rnn[0], f"w{i}").array for i in range(6)]
    b = [getattr(link.rnn[0], f"b{i}").array for i in range(6)]
    for arr in b:
        arr[...] = rng.normal(size=arr.shape)  # non-zero biases: b5's place matters
    x = rng.normal(size=(n, t, e))
    hs = np.zeros((n, h))
    hs_before = np.zeros((n, h))
    for step in range(t):
        xt = x[:, step]
        r = _sig(xt @ w[0].T + b[0] + hs @ w[3].T + b[3])
        z = _sig(xt @ w[1].T + b[1] + hs @ w[4].T + b[4])
        cand = np.tanh(xt @ w[2].T + b[2] + r * (hs @ w[5].T + b[5]))
        hs = (1 - z) * cand + z * hs
        rb = _sig(xt @ w[0].T + b[0] + hs_before @ w[3].T + b[3])
        zb = _sig(xt @ w[1].T + b[1] + hs_before @ w[4].T + b[4])
        cb_ = np.tanh(xt @ w[2].T + b[2] + (rb * hs_before) @ w[5].T + b[5])
        hs_before = (1 - zb) * cb_ + zb * hs_before
    with chainer.using_config("train", False):
        got = link(np.ascontiguousarray(x.transpose(1, 0, 2))).array  # time-major (T, N, E)
    np.testing.assert_allclose(got, hs, rtol=1e-12, atol=1e-14)
    assert np.abs(got - hs_before).max() > 1e-3  # the convention is observable here


# --------------------------------------------------------------------------- optimisers (float64)


def _run_chainer_optimizer(opt, p0, grads):
    link = chainer.Link()
    with link.init_scope():
        link.p = chainer.Parameter(p0.copy())
    opt.setup(link)
    for g in grads:
        link.p.grad = g.copy()
        opt.update()
    return link.p.array


def _run_reference(opt, p0, grads):
    params = {"p": p0.copy()}
    for g in grads:
        opt.step(params, {"p": g})
    return params["p"]


def test_momentum_sgd_is_the_specs_rule_in_float64():
    rng = np.random.default_rng(4)
    p0 = rng.normal(size=(7, 3))
    grads = [rng.normal(size=p0.shape) for _ in range(5)]
    got = _run_chainer_optimizer(chainer.optimizers.MomentumSGD(lr=0.01, momentum=0.9), p0, grads)
    want = _run_reference(ref_optim.SGD(lr=0.01, momentum=0.9), p0, grads)
    # v = m*v - lr*g; w += v  equals  buf = m*buf + g; w -= lr*buf  at constant lr: only
    # rounding differs, so the change of w agrees to ~1e-15 of its size (bound 1e-12)
    np.testing.assert_allclose(got - p0, want - p0, rtol=1e-12, atol=0)


def test_spec_adam_matches_algorithm_1_in_closed_form():
    # An answer independent of any transcription: with a constant gradient g, Algorithm 1's
    # bias-corrected moments are exactly m_hat = g and v_hat = g^2 at every step, so each step
    # moves w by exactly -lr * g / (|g| + eps). Gradients from O(1) down to O(eps), where
    # epsilon placement shows (Chainer's stock placement is off by up to 30% there).
    p0 = np.linspace(-1.0, 1.0, 40)
    g = np.sign(np.sin(np.arange(40.0)) + 0.5) * np.logspace(0, -10, 40)
    steps = 5
    got = _run_chainer_optimizer(SpecAdam(alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8), p0,
                                 [g] * steps)  # fmt: skip
    want = p0 - steps * 1e-3 * g / (np.abs(g) + 1e-8)
    # float64 rounding of ~20 operations per step: ~1e-15 of the change (bound 1e-11)
    np.testing.assert_allclose(got - p0, want - p0, rtol=1e-11, atol=0)


def test_chainers_own_adam_is_not_the_spec_where_gradients_are_tiny():
    rng = np.random.default_rng(6)
    p0 = rng.normal(size=(50,))
    grads = [np.full(50, 1e-9) for _ in range(3)]  # |g| ~ eps
    want = _run_reference(ref_optim.Adam(lr=1e-3, eps=1e-8), p0, grads) - p0
    stock = _run_chainer_optimizer(chainer.optimizers.Adam(alpha=1e-3, eps=1e-8), p0, grads) - p0
    spec = _run_chainer_optimizer(SpecAdam(alpha=1e-3, eps=1e-8), p0, grads) - p0
    np.testing.assert_allclose(spec, want, rtol=1e-12)
    # eps outside the bias correction: the update differs by ~(1 - sqrt(1 - beta2^t)), O(10%)
    assert np.abs(stock - want).max() > 0.05 * np.abs(want).max()


# --------------------------------------------------------------------------- loader, devices, model


def test_loader_types_and_complete_batches():
    w = get_workload("cnn")
    model = make(cb, w, canonical_weights(w, 0), dtype="float64")
    x = np.random.default_rng(0).random((10, 3, 32, 32), dtype=np.float32)
    y = np.arange(10) % 10
    batches = list(model.loader(x, y, np.arange(10)[::-1], 4))
    assert len(batches) == 2  # 10 // 4 complete batches, the last 2 samples dropped
    xb, yb = batches[0]
    assert xb.dtype == np.float64 and yb.dtype == np.int32
    np.testing.assert_array_equal(xb, x[[9, 8, 7, 6]])
    np.testing.assert_array_equal(yb, y[[9, 8, 7, 6]])


def test_cuda_is_a_clear_error_without_cupy_or_gpu():
    assert cb.cuda_available() is False
    with pytest.raises(BackendError, match="backend 'chainer' on cuda") as err:
        rt.place("cuda")
    assert "\n" not in str(err.value)


def test_unknown_build_option_is_one_clear_error():
    w = get_workload("cnn")
    with pytest.raises(BackendError, match="no build option 'compile'; valid: type_check"):
        make(cb, w, canonical_weights(w, 0), compile=True)


def test_run_op_dropout_is_seeded_and_leaves_numpy_global_state_alone():
    x = np.ones((4, 1000), dtype=np.float32)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = cb.run_op(ops.Dropout(0.5), x, runtime_for(cb, seed=7), training=True)
    b = cb.run_op(ops.Dropout(0.5), x, runtime_for(cb, seed=7), training=True)
    c = cb.run_op(ops.Dropout(0.5), x, runtime_for(cb, seed=8), training=True)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)  # the seed drives the mask
    np.testing.assert_array_equal(np.random.get_state()[1], before)


def test_summary_shows_the_chain_and_manifest_records_the_path():
    w = get_workload("gru")
    model = make(cb, w, canonical_weights(w, 0))
    text = model.summary()
    assert "EmbedID" in text and "Linear" in text and "GRULast" in text
    assert "/rnn/0/w0" in text and "total: " in text
    man = model.manifest()
    assert man["layout"].startswith("TNC") and "SpecAdam" in man["optimizer"]
    assert "SerialIterator" in man["loader"]
    assert "train_step" in man["gated_program"] and "type_check off" in man["compile"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_in_training_keeps_the_dtype_and_scales_survivors(dtype):
    # the mask is drawn from float32 uniforms in either dtype; the survivors are
    # x / (1 - rate) rounded in ``dtype`` (here exactly 2 for rate 0.5)
    x = np.full((4, 5000), 3.0, dtype=dtype)
    y = cb.run_op(ops.Dropout(0.5), x, runtime_for(cb, dtype=dtype, seed=1), training=True)
    assert y.dtype == np.dtype(dtype)
    assert set(np.unique(y)) == {0.0, 6.0}
    assert 0.45 < np.mean(y == 0) < 0.55  # 20000 draws: 14 standard deviations of slack


# --------------------------------------------------------------------------- runtime in, facts out


def _blas_threads() -> set[int]:
    """The BLAS pools' thread counts as threadpoolctl reads them from the libraries."""
    from threadpoolctl import threadpool_info

    return {int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"}


def test_threads_are_applied_to_numpys_blas_and_read_back():
    from rosetta.runtime import usable_cores

    r = runtime_for(cb, threads=1)
    assert r.threads == 1 and _blas_threads() == {1}
    w = get_workload("cnn")
    man = make(cb, w, canonical_weights(w, 0), threads=1).manifest()
    assert man["threads"] == 1 and "1 threads" in man["blas"]
    if usable_cores() >= 2:  # the read-back follows the setting, it is not a constant
        assert runtime_for(cb, threads=2).threads == 2 and _blas_threads() == {2}
    runtime_for(cb, threads=1)  # leave the shared machine's BLAS at one thread


class _Record(chainer.FunctionHook):
    """Every Chainer function a step applies: label, dropout ratio, and type_check in effect."""

    name = "record"

    def __init__(self) -> None:
        self.calls: list[tuple[str, float | None, bool]] = []

    def forward_preprocess(self, function, in_data):
        ratio = getattr(function, "dropout_ratio", None)
        self.calls.append((function.label, ratio, bool(chainer.config.type_check)))


def _cnn(seed: int = 0, **kw):
    w = get_workload("cnn")
    x, y = _gate_batch(w)
    return make(cb, w, canonical_weights(w, 0), seed=seed, threads=1, **kw), x, y


def _gate_batch(w, n: int = 4):
    rng = np.random.default_rng(5)
    return rng.random((n, *w.input.shape), dtype=np.float32), rng.integers(0, 10, n)


def _losses(model, x, y, steps: int = 2) -> list[float]:
    batch = next(iter(model.loader(x, y, np.arange(len(x)), len(x))))
    return [float(model.to_numpy(model.train_step(batch))) for _ in range(steps)]


def test_the_seed_drives_dropout_in_training():
    a, x, y = _cnn(seed=11)
    b, _, _ = _cnn(seed=11)
    c, _, _ = _cnn(seed=12)
    la = _losses(a, x, y)
    np.random.seed(0)  # the global generator, which Chainer's own draw would read, is unused
    assert _losses(b, x, y) == la  # same seed: the same masks, bit for bit
    assert _losses(c, x, y) != la  # another seed: other masks (the CNN has three dropouts)


def test_set_dropout_switches_the_rate_inside_the_same_step():
    model, x, y = _cnn()
    batch = next(iter(model.loader(x, y, np.arange(len(x)), len(x))))
    seen = {}
    for on in (True, False):
        model.set_dropout(on)
        with _Record() as hook:
            model.train_step(batch)
        seen[on] = hook.calls
    model.set_dropout(True)
    # the same Chainer functions in the same order (nothing traced, nothing swapped) ...
    assert [c[0] for c in seen[True]] == [c[0] for c in seen[False]]
    drop_on = [c[1] for c in seen[True] if c[0] == "Dropout"]
    drop_off = [c[1] for c in seen[False] if c[0] == "Dropout"]
    assert drop_on == [0.25, 0.25, 0.5]  # the spec's rates (rosetta/models/cnn.yaml)
    assert drop_off == [0.0, 0.0, 0.0]  # ... with dropout's rate 0 inside the same call
    # the timed step and the gate's steps run under one configuration: type_check off
    assert not any(c[2] for c in seen[True] + seen[False])
    with _Record() as hook:
        model.loss_and_grads(x, y)
    assert hook.calls and not any(c[2] for c in hook.calls)


def test_set_dropout_off_makes_train_step_deterministic():
    model, x, y = _cnn()
    p0 = model.get_params()

    def step_from_p0():
        model.set_params(p0)  # same parameters, fresh optimiser state
        loss = _losses(model, x, y, steps=1)
        return loss, model.get_params()

    model.set_dropout(False)
    (l1, p1), (l2, p2) = step_from_p0(), step_from_p0()
    assert l1 == l2
    for k in p1:
        np.testing.assert_array_equal(p1[k], p2[k], err_msg=k)
    model.set_dropout(True)
    (l3, p3), (l4, p4) = step_from_p0(), step_from_p0()
    assert l3 != l4  # each step draws new masks
    assert any(not np.array_equal(p3[k], p4[k]) for k in p3)


def test_gate_steps_go_through_train_step():
    # no override: the base class runs k steps through train_step with dropout off
    from rosetta.backends.chainer.model import ChainerModel

    assert ChainerModel.deterministic_steps is Model.deterministic_steps
    model, x, y = _cnn()
    calls = []
    step = model.train_step
    model.train_step = lambda batch: calls.append(model.switch.enabled) or step(batch)
    model.deterministic_steps(x, y, 3)
    assert calls == [False, False, False] and model.switch.enabled is True


def _time_major_concat(axis: int):
    """An unmasked token model (time-major in Chainer: no op reads the mask, so the ids stay
    (T, N)): the embedding and a dense layer of it joined by a concat, then a GRU."""
    from pathlib import Path

    from rosetta.spec.loader import parse_workload
    from rosetta.spec.probes import probe_spec

    spec = probe_spec("gru", 0)
    spec["name"] = "time_major_concat"
    embedding, gru, head = spec["layers"]
    init = head["init"]
    spec["layers"] = [
        {**embedding, "id": "source"},
        {"op": "dense", "name": "d", "units": 8, "bias": True, "init": init, "id": "b"},
        {"op": "concat", "axis": axis, "inputs": ["b", "source"]},
        gru,
        head,
    ]
    return parse_workload(spec, Path("<test>/time_major_concat.yaml"))


@pytest.mark.parametrize("axis", [0, 1], ids=["time", "features"])
def test_concat_of_a_time_major_sequence_matches_reference(axis):
    # the sequences' layout is the model's (lowering.SequenceLayout): time leads here
    from rosetta.runner.gate import run_gate
    from rosetta.spec.probes import probe_batch

    w = _time_major_concat(axis)
    params = canonical_weights(w, 0)
    x, y = probe_batch(w)
    model = make(cb, w, params, dtype="float64")
    assert type(model.net) is chainer.Sequential  # no TokenSequential: ids stay (T, N)
    result = run_gate(model, w, params, x, y, "float64")
    assert result.equivalent, result.divergence


# --------------------------------------------------------------------------- hand-written models


def _hand_written(name: str, params: dict, size: int | None = None):
    """The lowered model and the hand-written one (float64, the same canonical weights)."""
    from benchmarks.handwritten import chainer_models as hw

    w = get_workload(name)
    w = w.at_image_size(size) if size else w
    model = make(cb, w, params, dtype="float64")
    with chainer.using_config("dtype", np.dtype("float64")):  # parameters in float64
        hand, opt = hw.make(name)
    hand.load_canonical(params)
    return w, model, hand, opt


@pytest.mark.parametrize(
    "name,size",
    [
        ("cnn", None),
        ("gru", None),
        pytest.param("resnet50", 32, marks=pytest.mark.slow),  # ~2.5 s: the quick tier's budget
        ("transformer", None),
    ],
)
def test_handwritten_models_compute_what_the_lowered_ones_compute(name, size):
    """The speed benchmark (``benchmarks/lowering_chainer.py``) compares the two; it only means
    something if they are the same model. float64, test mode: both run Chainer's functions
    (the transformer's mask additive -1e9 against the lowered select of the dtype's lowest
    value, an exact 0 weight either way), so only summation order may differ (~1e-16 per op,
    compounded over ResNet's 53 convolutions), hence 1e-10 relative. A transformer row of
    padding only pools to 0 on both sides."""
    from benchmarks.handwritten import chainer_models as hw

    w = get_workload(name).at_image_size(size) if size else get_workload(name)
    w, model, hand, _ = _hand_written(name, canonical_weights(w), size)
    x, _ = gate_batch(w, n=3)
    if name == "transformer":
        x[2] = 0  # a review of padding only
    want = model.predict_numpy(x)
    got = hw.predict(hand, x if name in ("gru", "transformer") else x.astype(np.float64))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * np.abs(want).max())


def test_handwritten_transformer_decays_the_specs_matrices_by_lr_times_decay():
    """Chainer's ``AdamW`` decays what the spec decays, by ``lr * wd`` a step: one update with
    zero gradients moves no parameter through Adam (m = v = 0), so what changes is the decay
    alone. The changed parameters are named through their values (the canonical weights
    offset by distinct random amounts: every tensor unique, none 0) and must be exactly the
    spec's decay set (the linear layers' matrices, not the tables, biases or LayerNorm); each
    moves by lr * wd = 1e-5 of itself (float64: 1e-9 relative). Chainer's ``weight_decay_rate``
    is not scaled by ``alpha``: passing the spec's 0.01 there decays 1000x too fast."""
    w = get_workload("transformer")
    rng = np.random.default_rng(1)
    params = {
        k: v + rng.uniform(0.01, 0.02, v.shape).astype(v.dtype)
        for k, v in canonical_weights(w).items()
    }
    _, _, hand, opt = _hand_written("transformer", params)
    before = {name: p.array.copy() for name, p in hand.namedparams()}
    for p in hand.params():
        p.grad = np.zeros_like(p.array)
    opt.update()
    decayed = set()
    for name, p in hand.namedparams():
        b = before[name]
        change = b - p.array
        if np.any(change):
            canon = b.T if name.endswith("/W") else b  # Linear.W is (out, in)
            keys = [k for k, v in params.items() if v.shape == canon.shape and (v == canon).all()]
            decayed.update(keys)
            np.testing.assert_allclose(change, 1e-3 * 0.01 * b, rtol=1e-9)
    assert decayed == {k for k in params if w.optimizer.decays(k)}
