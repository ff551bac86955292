"""The Rosetta of JAX: every op of the spec as a pure function of ``jax.lax`` primitives.

``LOWERINGS`` maps each op class to a function ``lower(op, b) -> Layer``; a ``Layer`` is a pure
function ``(params, x, run) -> y`` over the parameter pytree (a dict keyed by canonical names,
arrays in the native layouts of ``layout.py``). A graph lowers to one composed function that
``jax.jit`` traces once per batch shape (``model.py``).

Why ``jax.lax`` and not Flax modules: the spec already *is* the module tree, with canonical
parameter names; a Flax model would add a second naming scheme (``params/Conv_0/kernel``) to map
back and forth, and hide the choices this backend must state: the convolution's dimension
numbers (NHWC or NCHW), explicit asymmetric padding, the max-pool's ``-inf`` padding, the GRU's
``reset_after`` gate equations under ``lax.scan``, and float32 precision (``Precision.HIGHEST``,
no TF32 on GPUs). Here each is one line a reader can check against ``numpy_ref``. The
hand-written Flax models in ``benchmarks/handwritten/jax_models.py`` measure what this costs.

Layouts: images are ``NHWC`` or ``NCHW`` (``Builder.layout``), kernels ``HWIO`` or ``OIHW`` to
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

from rosetta.backends.base import unsupported
from rosetta.spec import ops

Params = dict[str, Any]  # canonical name -> jax array in native layout


class Run(NamedTuple):
    """Per-call context of a forward pass: training mode (static) and the dropout key."""

    training: bool
    key: Any = None  # a jax PRNG key, or None with dropout off


Layer = Callable[[Params, Any, Run], Any]


@dataclass
class Builder:
    """What a lowering needs to know beyond its op: layout, dtype, dropout sites."""

    layout: str  # "NHWC" | "NCHW"
    dtype: Any  # jnp.float32 | jnp.float64
    backend: str = "jax"
    platform: str = "cpu"  # the jax platform the programs run on
    conv_weight_grad: str = "auto"  # "xla" | "gemm" | "auto" (see use_gemm_weight_grad)
    gru_unroll: int = 1  # lax.scan unroll factor of the GRU (GRU_UNROLL by default)
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


GRU_UNROLL = 1  # scan unroll: 10 took 1.08x [0.98, 1.16] as long (lowering_jax --choices)
HIGHEST = lax.Precision.HIGHEST  # float32 stays float32 (no TF32/bf16 passes on accelerators)


def _conv2d(op: ops.Conv2D, b: Builder) -> Layer:
    kernel_layout = "HWIO" if b.layout == "NHWC" else "OIHW"
    dims = (b.layout, kernel_layout, b.layout)
    top, bottom, left, right = op.padding
    shape = [1, 1, 1, 1]
    shape[b.channel_axis] = op.out_channels

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(
            x,
            w,
            window_strides=op.stride,
            padding=((top, bottom), (left, right)),
            dimension_numbers=dims,
            precision=HIGHEST,
        )

    if b.use_gemm_weight_grad(op):
        conv = _with_gemm_weight_grad(conv, op)

    def conv2d(p: Params, x: Any, run: Run) -> Any:
        y = conv(x, p[f"{op.name}.kernel"])
        return y + p[f"{op.name}.bias"].reshape(shape) if op.bias else y

    return conv2d


def _with_gemm_weight_grad(conv: Callable, op: ops.Conv2D) -> Callable:
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
                taps.append(jnp.dot(dyt, xs.reshape(-1, c), precision=HIGHEST).T)  # (C, O)
        return dx, jnp.stack(taps).reshape(kh, kw, c, o)  # (KH*KW, C, O) -> HWIO

    conv_gemm.defvjp(fwd, bwd)
    return conv_gemm


def _maxpool2d(op: ops.MaxPool2D, b: Builder) -> Layer:
    # (A reshape-and-max for non-overlapping windows was 5x faster alone on XLA:CPU, forward and
    # backward, but the whole CNN step did not move (1.672 s both): kept as reduce_window.)
    top, bottom, left, right = op.padding
    window = b.spatial(op.kernel, 1)
    strides = b.spatial(op.stride, 1)
    padding = b.spatial(((top, bottom), (left, right)), (0, 0))

    def maxpool2d(p: Params, x: Any, run: Run) -> Any:
        # padded cells are -inf: they never win
        return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, strides, padding)

    return maxpool2d


def _relu(op: ops.ReLU, b: Builder) -> Layer:
    return lambda p, x, run: jnp.maximum(x, 0)  # weak 0: dtype kept; gradient 0 at x == 0


def _dropout(op: ops.Dropout, b: Builder) -> Layer:
    site = next(b.sites)
    keep = 1.0 - op.rate

    def dropout(p: Params, x: Any, run: Run) -> Any:
        if not run.training or op.rate == 0:
            return x
        mask = jax.random.bernoulli(jax.random.fold_in(run.key, site), keep, x.shape)
        return jnp.where(mask, x / jnp.asarray(keep, x.dtype), jnp.zeros((), x.dtype))

    return dropout


def _flatten(op: ops.Flatten, b: Builder) -> Layer:
    # (N, H, W, C) -> (N, H*W*C) in NHWC: the next dense layer's rows were permuted from the
    # spec's channel-major order at set_params (layout.py); (N, C, H, W) -> (N, C*H*W) in NCHW
    return lambda p, x, run: x.reshape(x.shape[0], -1)


def _dense(op: ops.Dense, b: Builder) -> Layer:
    def dense(p: Params, x: Any, run: Run) -> Any:
        y = jnp.dot(x, p[f"{op.name}.kernel"], precision=HIGHEST)  # (N, I) @ (I, O) -> (N, O)
        return y + p[f"{op.name}.bias"] if op.bias else y

    return dense


def _batchnorm(op: ops.BatchNorm, b: Builder) -> Layer:
    n = op.name

    def batchnorm(p: Params, x: Any, run: Run) -> Any:
        shape = [1] * x.ndim  # per-channel statistics broadcast on the channel axis
        shape[b.channel_axis if x.ndim == 4 else 1] = -1
        eps = jnp.asarray(op.eps, x.dtype)
        mean, var = p[f"{n}.mean"].reshape(shape), p[f"{n}.var"].reshape(shape)
        gamma, beta = p[f"{n}.gamma"].reshape(shape), p[f"{n}.beta"].reshape(shape)
        return (x - mean) / jnp.sqrt(var + eps) * gamma + beta  # inference mode

    return batchnorm


def _global_avgpool(op: ops.GlobalAvgPool, b: Builder) -> Layer:
    return lambda p, x, run: jnp.mean(x, axis=b.spatial_axes)  # (N, ., ., .) -> (N, C)


def _embedding(op: ops.Embedding, b: Builder) -> Layer:
    # token ids (N, T) -> time-major vectors (T, N, E): the GRU's scan runs over axis 0
    return lambda p, x, run: jnp.take(p[f"{op.name}.table"], x.T, axis=0)


def _gru(op: ops.GRU, b: Builder) -> Layer:
    n, h = op.name, op.units

    def gru(p: Params, x: Any, run: Run) -> Any:
        # gate blocks z | r | h of the canonical (E, 3H) / (H, 3H) kernels and (3H,) biases, cut
        # once outside the loop: per gate (E, H), (H, H), (H,), (H,)
        gates = [
            tuple(p[f"{n}.{role}"][..., g * h : (g + 1) * h] for role in ROLES) for g in range(3)
        ]
        (kz, rz, bz, cz), (kr, rr, br, cr), (kh, rh, bh, ch) = gates

        def step(state: Any, xt: Any) -> tuple[Any, None]:
            # xt (N, E), state (N, H); one small matmul per gate and side, as Flax's GRUCell:
            # measured 1.25x faster on XLA:CPU than one (T*N, E) @ (E, 3H) input projection
            # hoisted out of the loop plus a sliced (N, H) @ (H, 3H) per step
            z = jax.nn.sigmoid(_dot(xt, kz) + bz + _dot(state, rz) + cz)  # update gate
            r = jax.nn.sigmoid(_dot(xt, kr) + br + _dot(state, rr) + cr)  # reset gate
            cand = jnp.tanh(_dot(xt, kh) + bh + r * (_dot(state, rh) + ch))  # reset after matmul
            return z * state + (1 - z) * cand, None

        h0 = jnp.zeros((x.shape[1], h), dtype=x.dtype)  # zero initial state (N, H)
        last, _ = lax.scan(step, h0, x, unroll=b.gru_unroll)  # over time: x is (T, N, E)
        return last  # the last step's state (N, H)

    return gru


ROLES = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")


def _dot(a: Any, w: Any) -> Any:
    return jnp.dot(a, w, precision=HIGHEST)


def _residual(op: ops.Residual, b: Builder) -> Layer:
    body = lower_sequence(op.body, b)
    shortcut = lower_sequence(op.shortcut, b)
    return lambda p, x, run: body(p, x, run) + shortcut(p, x, run)


LOWERINGS: dict[type, Callable[[Any, Builder], Layer]] = {
    ops.Conv2D: _conv2d,  # lax.conv_general_dilated, NHWC x HWIO
    ops.MaxPool2D: _maxpool2d,  # lax.reduce_window(max), -inf padding
    ops.ReLU: _relu,  # jnp.maximum
    ops.Dropout: _dropout,  # jax.random.bernoulli, key folded per site
    ops.Flatten: _flatten,  # reshape (dense rows permuted at set_params)
    ops.Dense: _dense,  # jnp.dot
    ops.BatchNorm: _batchnorm,  # inference-mode affine
    ops.GlobalAvgPool: _global_avgpool,  # jnp.mean over H, W
    ops.Embedding: _embedding,  # jnp.take, time-major out
    ops.GRU: _gru,  # lax.scan over time, reset_after
    ops.Residual: _residual,  # body + shortcut
}


def lower_sequence(nodes: tuple, b: Builder) -> Layer:
    """Lower ``nodes`` in order into one ``Layer``; an empty sequence is the identity."""
    layers = []
    for node in nodes:
        lower = LOWERINGS.get(type(node))
        if lower is None:
            raise unsupported(b.backend, node)
        layers.append(lower(node, b))

    def sequence(p: Params, x: Any, run: Run) -> Any:
        for layer in layers:
            x = layer(p, x, run)
        return x

    return sequence


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy of ``logits`` (N, K) against integer ``labels`` (N,)."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))
