"""The Rosetta of JAX: every op of the spec as a pure function of ``jax.lax`` primitives.

``TABLE`` is this backend's lowering (``rosetta.backends.driver``): each entry turns an op into a
*layer*, a pure function ``layer(params, x, run) -> y`` over the parameter pytree (a dict keyed by
canonical names, arrays in the native layouts of ``weights.py``); ``sequence`` chains layers and
``residual`` adds a block's two branches. A graph lowers to one composed function that
``jax.jit`` traces once per batch shape (``model.py``).

Why ``jax.lax`` and not Flax modules: the spec already *is* the module tree, with canonical
parameter names; a Flax model would add a second naming scheme (``params/Conv_0/kernel``) to map
back and forth, and hide the choices this backend must state: the convolution's dimension
numbers (NHWC or NCHW), explicit asymmetric padding, the max-pool's ``-inf`` padding, the GRU's
``reset_after`` gate equations under ``lax.scan``, and float32 precision (``Precision.HIGHEST``
unless the runtime allows TF32). Here each is one line a reader can check against ``numpy_ref``.
The hand-written Flax models in ``benchmarks/handwritten/jax_models.py`` measure what this costs.

Dropout is switched by ``Run.dropout``, a boolean *array* argument of the compiled program (not
a Python flag): the timed ``train`` executable runs with dropout on, and the gate runs the very
same executable with it off (masks of ones, scale 1), with no retrace.

Layouts: images are ``NHWC`` or ``NCHW`` (``Ctx.layout``), kernels ``HWIO`` or ``OIHW`` to
match; sequences run time-major through ``lax.scan``. Every array made here takes the model's
dtype explicitly (see ``runtime.precision_scope``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rosetta.backends.driver import LoweringTable, Site, lower_op
from rosetta.backends.jax import weights
from rosetta.backends.jax.runtime import jax_device, precision_scope
from rosetta.backends.jax.source import OPS
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "jax"
Params = dict[str, Any]  # canonical name -> jax array in native layout
GRU_UNROLL = 1  # scan unroll: 10 took 1.08x [0.98, 1.16] as long (lowering_jax --choices)
#: the forms of multi-head attention (``Ctx.attention``): ``jax.nn``, one
#: ``jax.nn.dot_product_attention`` (the default; float64 always composes, see
#: :func:`attention_in_effect`), or ``composed`` from ``einsum``/``softmax``
ATTENTION_FORMS = ("jax.nn", "composed")
ATTENTION_DEFAULT = "jax.nn"


class Run(NamedTuple):
    """Per-call context of a forward pass."""

    training: bool  # static: the train programs (True) or the evaluation ones (False)
    key: Any = None  # a jax PRNG key (training only)
    dropout: Any = None  # a traced bool scalar: dropout on (True) or masks of ones (False)
    valid: Any = None  # (N, T) bool, True at real tokens: set by the model's own sequence


Layer = Callable[[Params, Any, Run], Any]


@dataclass
class Ctx:
    """What an entry needs beyond its op and site: layout, dtype, precision, fast-path knobs."""

    layout: str  # "NHWC" | "NCHW" (images)
    dtype: Any  # jnp.float32 | jnp.float64
    precision: Any = lax.Precision.HIGHEST  # None: jax_default_matmul_precision (TF32 allowed)
    platform: str = "cpu"  # the jax platform the programs run on
    conv_weight_grad: str = "auto"  # "xla" | "gemm" | "auto" (see use_gemm_weight_grad)
    gru_unroll: int = GRU_UNROLL  # lax.scan unroll factor of the GRU
    time_major: bool = True  # embedded sequences (T, N, E) for the GRU's scan; else (N, T, E)
    attention: str = ATTENTION_DEFAULT  # the form of every attention op (ATTENTION_FORMS)
    sites: Iterator[int] = field(default_factory=itertools.count)  # dropout key per site

    def use_gemm_weight_grad(self, op: ops.Conv2D) -> bool:
        """Whether conv ``op`` takes its kernel gradient from per-tap GEMMs.

        ``auto``: on the CPU in NHWC (XLA:CPU's kernel-gradient convolution is the slow one;
        cuDNN's is not). Measured in ``benchmarks/lowering_jax.py --choices``."""
        if self.layout != "NHWC" or self.conv_weight_grad == "xla":
            return False
        return self.conv_weight_grad == "gemm" or self.platform == "cpu"

    @property
    def channel_axis(self) -> int:
        return 3 if self.layout == "NHWC" else 1

    @property
    def spatial_axes(self) -> tuple[int, int]:
        return (1, 2) if self.layout == "NHWC" else (2, 3)

    def spatial(self, a: tuple, fill: Any) -> tuple:
        """A per-axis tuple for an image tensor: ``a`` (H, W) on the spatial axes, else ``fill``."""
        out = [fill] * 4
        out[self.spatial_axes[0]], out[self.spatial_axes[1]] = a
        return tuple(out)

    def dot(self, a: Any, w: Any) -> Any:
        """``a @ w`` at the runtime's precision."""
        return jnp.dot(a, w, precision=self.precision)


def conv2d(op: ops.Conv2D, site: Site, ctx: Ctx) -> Layer:
    kernel_layout = "HWIO" if ctx.layout == "NHWC" else "OIHW"
    dims = (ctx.layout, kernel_layout, ctx.layout)
    top, bottom, left, right = op.padding
    shape = [1, 1, 1, 1]
    shape[ctx.channel_axis] = op.out_channels

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(
            x,
            w,
            window_strides=op.stride,
            padding=((top, bottom), (left, right)),
            dimension_numbers=dims,
            precision=ctx.precision,
        )

    if ctx.use_gemm_weight_grad(op):
        conv = _with_gemm_weight_grad(conv, op, ctx)

    def conv2d_layer(p: Params, x: Any, run: Run) -> Any:
        y = conv(x, p[f"{op.name}.kernel"])
        return y + p[f"{op.name}.bias"].reshape(shape) if op.bias else y

    return conv2d_layer


def _with_gemm_weight_grad(conv: Callable, op: ops.Conv2D, ctx: Ctx) -> Callable:
    """``conv`` (NHWC x HWIO) whose kernel gradient is one GEMM per kernel tap.

    XLA:CPU lowers the kernel gradient of a convolution to another convolution whose "kernel" is
    the whole output gradient (32 x 32 for the CNN's conv2) and runs it 4-6x slower per FLOP
    than the forward convolution (measured; PyTorch's oneDNN does it at forward speed). Written
    as ``dW[i, j] = x_shifted(i, j)^T @ dy`` over the (N*Ho*Wo) rows it is plain GEMMs. The input
    gradient stays XLA's (as fast as its forward). Whole CNN step: XLA's kernel gradient took
    1.19x [1.14, 1.27] as long (9 interleaved rounds; 0.92-1.56 in noisier runs)."""
    kh, kw = op.kernel
    sh, sw = op.stride
    top, bottom, left, right = op.padding

    @jax.custom_vjp
    def conv_gemm(x: Any, w: Any) -> Any:
        return conv(x, w)

    def fwd(x: Any, w: Any) -> tuple[Any, tuple[Any, Any]]:
        return conv(x, w), (x, w)

    def bwd(res: tuple[Any, Any], dy: Any) -> tuple[Any, Any]:
        x, w = res
        (dx,) = jax.vjp(lambda x_: conv(x_, w), x)[1](dy)
        _, ho, wo, o = dy.shape
        c = x.shape[3]
        xp = jnp.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))  # (N, Hp, Wp, C)
        dyt = dy.reshape(-1, o).T  # (N, Ho, Wo, O) -> (N*Ho*Wo, O) -> (O, N*Ho*Wo)
        taps = []
        for i in range(kh):
            for j in range(kw):
                # input pixels under tap (i, j) of every output: (N, Ho, Wo, C) -> (N*Ho*Wo, C)
                xs = xp[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                taps.append(ctx.dot(dyt, xs.reshape(-1, c)).T)  # (O, C) -> (C, O)
        return dx, jnp.stack(taps).reshape(kh, kw, c, o)  # (KH*KW, C, O) -> HWIO

    conv_gemm.defvjp(fwd, bwd)
    return conv_gemm


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: Ctx) -> Layer:
    # (A reshape-and-max for non-overlapping windows was 5x faster alone on XLA:CPU, forward and
    # backward, but the whole CNN step did not move (1.672 s both): kept as reduce_window.)
    top, bottom, left, right = op.padding
    window = ctx.spatial(op.kernel, 1)
    strides = ctx.spatial(op.stride, 1)
    padding = ctx.spatial(((top, bottom), (left, right)), (0, 0))

    def maxpool2d_layer(p: Params, x: Any, run: Run) -> Any:
        # padded cells are -inf: they never win
        return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, strides, padding)

    return maxpool2d_layer


def relu(op: ops.ReLU, site: Site, ctx: Ctx) -> Layer:
    # where(x > 0, x, 0), not maximum(x, 0): XLA's max sends half the gradient to each side of a
    # tie, so maximum's gradient at exactly 0 is 0.5; the reference (and every other backend)
    # gives 0 there, which an all-black image makes visible (tests/test_backend_jax.py)
    return lambda p, x, run: jnp.where(x > 0, x, jnp.zeros((), x.dtype))


def dropout(op: ops.Dropout, site: Site, ctx: Ctx) -> Layer:
    index = next(ctx.sites)
    keep = 1.0 - op.rate

    def dropout_layer(p: Params, x: Any, run: Run) -> Any:
        if not run.training or op.rate == 0:
            return x
        one = jnp.ones((), x.dtype)
        mask = jax.random.bernoulli(jax.random.fold_in(run.key, index), keep, x.shape)
        mask = mask | ~run.dropout  # dropout off: every unit kept ...
        scale = jnp.where(run.dropout, jnp.asarray(keep, x.dtype), one)  # ... and x / 1 == x
        return jnp.where(mask, x / scale, jnp.zeros((), x.dtype))

    return dropout_layer


def flatten(op: ops.Flatten, site: Site, ctx: Ctx) -> Layer:
    # (N, H, W, C) -> (N, H*W*C) in NHWC: the next dense layer's rows were permuted from the
    # spec's channel-major order at set_params (weights.py); (N, C, H, W) -> (N, C*H*W) in NCHW
    return lambda p, x, run: x.reshape(x.shape[0], -1)


def dense(op: ops.Dense, site: Site, ctx: Ctx) -> Layer:
    def dense_layer(p: Params, x: Any, run: Run) -> Any:
        y = ctx.dot(x, p[f"{op.name}.kernel"])  # (N, I) @ (I, O) -> (N, O)
        return y + p[f"{op.name}.bias"] if op.bias else y

    return dense_layer


def batchnorm(op: ops.BatchNorm, site: Site, ctx: Ctx) -> Layer:
    n = op.name

    def batchnorm_layer(p: Params, x: Any, run: Run) -> Any:
        shape = [1] * x.ndim  # per-channel statistics broadcast on the channel axis
        shape[ctx.channel_axis if x.ndim == 4 else 1] = -1
        eps = jnp.asarray(op.eps, x.dtype)
        mean, var = p[f"{n}.mean"].reshape(shape), p[f"{n}.var"].reshape(shape)
        gamma, beta = p[f"{n}.gamma"].reshape(shape), p[f"{n}.beta"].reshape(shape)
        return (x - mean) / jnp.sqrt(var + eps) * gamma + beta  # inference mode

    return batchnorm_layer


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: Ctx) -> Layer:
    return lambda p, x, run: jnp.mean(x, axis=ctx.spatial_axes)  # (N, ., ., .) -> (N, C)


def embedding(op: ops.Embedding, site: Site, ctx: Ctx) -> Layer:
    # token ids (N, T) -> time-major vectors (T, N, E): the GRU's scan runs over axis 0;
    # batch-major (N, T, E) where no scan follows (attention works on the batch axis first)
    if ctx.time_major:
        return lambda p, x, run: jnp.take(p[f"{op.name}.table"], x.T, axis=0)
    return lambda p, x, run: jnp.take(p[f"{op.name}.table"], x, axis=0)


def layer_norm(op: ops.LayerNorm, site: Site, ctx: Ctx) -> Layer:
    eps = np.asarray(op.eps, ctx.dtype)

    def layer_norm_layer(p: Params, x: Any, run: Run) -> Any:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)  # biased
        xhat = (x - mean) * lax.rsqrt(var + eps)
        return xhat * p[f"{op.name}.gamma"] + p[f"{op.name}.beta"]

    return layer_norm_layer


def gelu(op: ops.GELU, site: Site, ctx: Ctx) -> Layer:
    return lambda p, x, run: jax.nn.gelu(x, approximate=False)  # exact erf


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    t = site.in_shape[0]
    return lambda p, x, run: x + p[f"{op.name}.table"][:t]  # (N, T, E) + (T, E)


def attention(op: ops.Attention, site: Site, ctx: Ctx) -> Layer:
    t, e = site.in_shape
    h, d = op.heads, e // op.heads

    def attention_layer(p: Params, x: Any, run: Run) -> Any:
        n = x.shape[0]

        def project(role: str, bias: bool) -> Any:
            y = ctx.dot(x, p[f"{op.name}.{role}_kernel"])
            y = y + p[f"{op.name}.{role}_bias"] if bias else y
            return y.reshape(n, t, h, d)  # (N, T, E) -> (B, T, N, H) as jax.nn wants it

        q, k, v = project("query", True), project("key", False), project("value", True)
        mask = run.valid[:, None, None, :]  # (N, 1, 1, T): keys that take part
        if ctx.attention == "composed":
            o = _attention_composed(q, k, v, mask, ctx)
        else:
            o = jax.nn.dot_product_attention(q, k, v, mask=mask)  # (N, T, heads, d)
        # a row without a valid key: jax.nn gives the mean of v (uniform weights); the spec 0
        any_key = jnp.any(run.valid, axis=1)[:, None, None, None]
        o = jnp.where(any_key, o, jnp.zeros((), o.dtype)).reshape(n, t, e)
        return ctx.dot(o, p[f"{op.name}.output_kernel"]) + p[f"{op.name}.output_bias"]

    return attention_layer


def attention_in_effect(option: str | None, dtype: Any, device: str = "cpu") -> tuple[str, str]:
    """The attention form (:data:`ATTENTION_FORMS`) a model in ``dtype`` on ``device`` lowers,
    and why: float64 always composes (``jax.nn.dot_product_attention``'s softmax runs in float32,
    jax 0.10, ``_dot_product_attention_core``, which the float64 gate's 1e-8 bounds would see);
    else the build's ``option`` (benchmarks) where given; else on the CPU the composed form, as
    measured (``python -m benchmarks fastpath_transformer``: jax.nn / composed 1.027 [1.007,
    1.060] of the train step, alone on a 2-core Zen 4, 2026-11-25: both are XLA programs of the
    same ops there), and on a GPU ``jax.nn.dot_product_attention``, the call that can reach
    cuDNN's fused attention (ran on an H200 in bf16, gated equivalent: docs/gpu/)."""
    if jnp.dtype(dtype) == jnp.float64:
        return "composed", "float64: jax.nn.dot_product_attention's softmax is float32 only"
    if option is not None:
        return option, "the build's attention option"
    if device == "cpu":
        return "composed", (
            "default on the CPU: the composed form, measured faster (jax.nn/composed 1.027 "
            "[1.007, 1.060], benchmarks/fastpath_transformer, Zen 4, 2026-11-25)"
        )
    return ATTENTION_DEFAULT, (
        "default on a GPU: jax.nn.dot_product_attention, the call that can reach cuDNN's fused "
        "attention (ran on an H200 in bf16, gated equivalent: docs/gpu/)"
    )


def _attention_composed(q: Any, k: Any, v: Any, mask: Any, ctx: Ctx) -> Any:
    """``jax.nn.dot_product_attention``'s steps written out in the inputs' dtype: ``einsum``
    scores scaled by ``1 / sqrt(d)``, padding keys at the dtype's lowest value, ``softmax``,
    ``einsum`` with ``v`` (layout (N, T, heads, d) in and out). What float64 runs, and the
    ``composed`` form of the others."""
    scale = np.asarray(1 / np.sqrt(q.shape[-1]), q.dtype)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, precision=ctx.precision) * scale
    logits = jnp.where(mask, logits, jnp.finfo(q.dtype).min)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bnts,bsnh->btnh", probs, v, precision=ctx.precision)


def masked_mean(op: ops.MaskedMean, site: Site, ctx: Ctx) -> Layer:
    def masked_mean_layer(p: Params, x: Any, run: Run) -> Any:
        w = run.valid.astype(x.dtype)  # (N, T)
        total = jnp.einsum("nte,nt->ne", x, w, precision=ctx.precision)
        return total / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), 1)

    return masked_mean_layer


GRU_ROLES = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")


def gru(op: ops.GRU, site: Site, ctx: Ctx) -> Layer:
    n, h = op.name, op.units

    def gru_layer(p: Params, x: Any, run: Run) -> Any:
        # gate blocks z | r | h of the canonical (E, 3H) / (H, 3H) kernels and (3H,) biases, cut
        # once outside the loop: per gate (E, H), (H, H), (H,), (H,)
        gates = [
            tuple(p[f"{n}.{role}"][..., g * h : (g + 1) * h] for role in GRU_ROLES)
            for g in range(3)
        ]
        (kz, rz, bz, cz), (kr, rr, br, cr), (kh, rh, bh, ch) = gates
        dot = ctx.dot

        def step(state: Any, xt: Any) -> tuple[Any, None]:
            # xt (N, E), state (N, H); one small matmul per gate and side, as Flax's GRUCell:
            # measured 1.25x faster on XLA:CPU than one (T*N, E) @ (E, 3H) input projection
            # hoisted out of the loop plus a sliced (N, H) @ (H, 3H) per step
            z = jax.nn.sigmoid(dot(xt, kz) + bz + dot(state, rz) + cz)  # update gate
            r = jax.nn.sigmoid(dot(xt, kr) + br + dot(state, rr) + cr)  # reset gate
            cand = jnp.tanh(dot(xt, kh) + bh + r * (dot(state, rh) + ch))  # reset after matmul
            return z * state + (1 - z) * cand, None

        h0 = jnp.zeros((x.shape[1], h), dtype=x.dtype)  # zero initial state (N, H)
        last, _ = lax.scan(step, h0, x, unroll=ctx.gru_unroll)  # over time: x is (T, N, E)
        return last  # the last step's state (N, H)

    return gru_layer


def sequence(layers: list[Layer], site: Site, ctx: Ctx) -> Layer:
    """Layers in order; an empty sequence is the identity (a plain residual shortcut). The
    model's own sequence over token ids records their padding mask for the masked ops."""
    tokens = site.path == "" and len(site.in_shape) == 1

    def sequence_layer(p: Params, x: Any, run: Run) -> Any:
        if tokens:
            run = run._replace(valid=x != 0)  # (N, T)
        for layer in layers:
            x = layer(p, x, run)
        return x

    return sequence_layer


def residual(body: Layer, shortcut: Layer, site: Site, ctx: Ctx) -> Layer:
    """``body(x) + shortcut(x)``."""
    return lambda p, x, run: body(p, x, run) + shortcut(p, x, run)


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy of ``logits`` (N, K) against integer ``labels`` (N,)."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


#: the layout of images, on either device, for every graph (the choice depends on no workload):
#: CPU: the CNN step in NCHW took 1.25x [1.17, 1.31] as long as in NHWC on this machine
#: (``benchmarks/lowering_jax.py --choices``; XLA:CPU's convolutions are NHWC-native); CUDA:
#: XLA's layout assignment picks the physical layout cuDNN wants whatever the logical one
#: (ran on an H200, docs/gpu/2026-11-27-h200: the CNN gated equivalent, 2.2 ms a training
#: step). ``build(..., layout="NCHW")`` overrides it for benchmarks.
IMAGE_LAYOUT = "NHWC"


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch, through ``TABLE`` (dropout keys from
    ``runtime.seed``)."""
    layout = IMAGE_LAYOUT
    with precision_scope(runtime.dtype):
        ctx = Ctx(layout, jnp.dtype(runtime.dtype))
        layer = lower_op(TABLE, op, tuple(x.shape[1:]), ctx)
        xa = np.asarray(x, dtype=runtime.dtype)
        xn = weights.image_to_native(xa, layout) if xa.ndim == 4 else xa
        run = Run(training, jax.random.key(runtime.seed), jnp.asarray(True))
        y = np.asarray(layer({}, jax.device_put(xn, jax_device(runtime.device)), run))
    if isinstance(op, ops.Flatten) and xa.ndim == 4:
        return weights.flat_to_canonical(y, xa.shape[1:], layout)
    return weights.image_to_canonical(y, layout) if y.ndim == 4 else y
