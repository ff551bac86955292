"""The Rosetta of PyTensor: every op of the spec as a function of symbolic tensors.

``TABLE`` is this backend's lowering (``rosetta.backends.driver``): each entry turns an op into
a *layer*, ``layer(x, run) -> y`` over PyTensor variables, reading its parameters from
``shared`` variables that the build context makes (native layouts, ``weights.py``); a graph
lowers to one composed function, applied once to a symbolic input per compiled program
(``model.py``), differentiated by ``pytensor.grad``.

PyTensor 3 kept Theano's graph, ``grad`` and ``scan`` but dropped its neural-network ops (the
abstract ``conv2d`` with its ``CorrMM`` C kernels and ``signal.pool``); what it has is
``tensor.signal.convolve2d``, a single-channel SciPy signal convolution run in Python per image
and channel pair. So the two image ops are written in PyTensor's own primitives, which every
linker compiles:

- **convolution**: explicit zero padding (``set_subtensor`` into zeros), the KH*KW strided
  slices of the padded input (one per kernel tap) concatenated on the channel axis, and *one*
  ``dot`` with the HWIO kernel seen as a (KH*KW*C, O) matrix (im2col, as Caffe and Chainer do);
  channels-last makes both the concatenation and the reshape free of transposes;
- **max-pooling**: the taps stacked on a new last axis, ``argmax`` over it, and the selected
  tap kept through ``switch``: the gradient reaches only the *first* maximum in row-major window
  order, the spec's rule (``pt.max``'s gradient would reach every tied cell, which a flat image
  makes visible); padding is ``-inf`` (never selected).

ReLU is ``switch(x > 0, x, 0)`` (gradient 0 at 0, the spec's; ``maximum``'s would be 1). Dropout
draws from a shared random generator seeded by the runtime (``pt.random.shared_rng``, its state
threaded from site to site and written back as an update of the compiled step) and is switched by
``Ctx.dropout_on``, a ``shared`` scalar the step reads (0: every unit kept, scale exactly 1), so
the gate runs the timed function itself. The GRU is ``scan`` over time-major ``(T, N, E)``, the
input projection of every step done by one ``dot`` before the loop, the spec's ``reset_after``
equations in the step.

The Transformer's ops keep that time-major ``(T, N, E)`` layout (the embedding's, which
``Model.output_to_canonical`` reads back for every sequence op) and are composed of PyTensor's
own ops, which the C linker compiles: LayerNorm as mean and biased variance over the last axis,
``eps`` inside the root; GELU with ``pt.erf`` (exact); learned positions as the table's first T
rows added; attention as one ``dot`` per projection, the heads split by reshape and
``dimshuffle`` to ``(N, H, T, d)``, ``pt.matmul`` (rewritten to the C ``BatchedDot``) for the
scores and the weighted values, and ``pt.special.softmax`` (the row maximum subtracted, so
large logits never overflow) over scores whose padding keys are ``switch``-ed to the dtype's
lowest finite value (weight exactly 0); a query whose every key is padding gets weights 0 (a
multiplication by "any key"), so its heads give 0 and no NaN reaches a gradient. The masked mean
divides by ``max(count, 1)``: 0 over zero tokens. The mask of real tokens (``ids != 0``) is made
once by the model's sequence over the ids and handed down in ``Run.valid``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, lower_op, unsupported
from rosetta.backends.pytensor import runtime as settings
from rosetta.backends.pytensor import weights
from rosetta.backends.pytensor.source import OPS
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops

settings.load()
import pytensor  # noqa: E402  (after runtime.load(), which keeps the BLAS warning quiet)
import pytensor.tensor as pt  # noqa: E402

NAME = "pytensor"


class Run(NamedTuple):
    """Per-application context of a forward pass."""

    training: bool  # the training graph (dropout drawn) or the evaluation one
    rngs: list | None = None  # the generator after each draw, in order (training graphs)
    #: (N, T) bool, True at real tokens (id != 0): made by the model's own sequence over token
    #: ids, read by the ops with ``mask: tokens`` (attention, masked mean)
    valid: Any = None
    #: the batch size read off the model's own input: shapes built from it stay shallow
    #: (``pt.alloc`` infers a static shape by rewriting its arguments' whole graph: read off a
    #: layer's input deep in ResNet-50, its 18 paddings made the build 11 s instead of 1)
    batch: Any = None

    def update(self, ctx: Ctx) -> dict:
        """The update of the shared generator after this forward's draws (``{}`` if none)."""
        return {ctx.rng: self.rngs[-1]} if self.rngs else {}


Layer = Callable[[Any, Run], Any]


@dataclass
class Ctx:
    """The build context: dtype, the ``shared`` parameters by canonical name (native layout),
    the dropout switch and random stream."""

    dtype: str
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    sites: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.rng = pt.random.shared_rng(seed=self.seed, name="dropout_rng")
        #: 1: dropout at the spec's rates; 0: every unit kept (the gate), same compiled step
        self.dropout_on = pytensor.shared(np.asarray(1, dtype=self.dtype), name="dropout_on")

    def shared(self, name: str, shape: tuple[int, ...]) -> Any:
        """The ``shared`` variable of parameter ``name`` (zeros until ``set_params``)."""
        var = pytensor.shared(np.zeros(shape, dtype=self.dtype), name=name)
        self.params[name] = var
        return var

    def const(self, value: float) -> Any:
        """A constant in the model's dtype."""
        return pt.constant(np.asarray(value, dtype=self.dtype))


def _batch(x: Any, run: Run) -> Any:
    """The batch size of NHWC ``x``: the model input's (:attr:`Run.batch`) where known."""
    return x.shape[0] if run.batch is None else run.batch


def _pad(x: Any, run: Run, site: Site, padding: tuple[int, int, int, int], value: Any) -> Any:
    """NHWC ``x`` padded with ``value`` (zeros for a convolution, -inf for max-pooling)."""
    top, bottom, left, right = padding
    if not any(padding):
        return x
    c, h, w = site.in_shape
    full = pt.alloc(value, _batch(x, run), h + top + bottom, w + left + right, c)
    return pt.set_subtensor(full[:, top : top + h, left : left + w, :], x)  # (N, Hp, Wp, C)


def _taps(xp: Any, site: Site, kernel: tuple[int, int], stride: tuple[int, int]) -> list[Any]:
    """The input under each kernel tap (i, j), row-major: KH*KW slices (N, Ho, Wo, C)."""
    (_, ho, wo), (sh, sw) = site.out_shape, stride
    return [
        xp[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw, :]
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]


def conv2d(op: ops.Conv2D, site: Site, ctx: Ctx) -> Layer:
    c, (kh, kw), o = site.in_shape[0], op.kernel, op.out_channels
    _, ho, wo = site.out_shape
    kernel = ctx.shared(f"{op.name}.kernel", (kh, kw, c, o))  # HWIO
    bias = ctx.shared(f"{op.name}.bias", (o,)) if op.bias else None

    def conv2d_layer(x: Any, run: Run) -> Any:
        taps = _taps(_pad(x, run, site, op.padding, ctx.const(0.0)), site, op.kernel, op.stride)
        patches = taps[0] if len(taps) == 1 else pt.concatenate(taps, axis=3)
        n = _batch(x, run)
        # (N, Ho, Wo, KH*KW*C) -> (N*Ho*Wo, KH*KW*C) @ (KH*KW*C, O) -> (N, Ho, Wo, O)
        y = pt.dot(patches.reshape((n * ho * wo, kh * kw * c)), kernel.reshape((kh * kw * c, o)))
        y = y.reshape((n, ho, wo, o))
        return y if bias is None else y + bias

    return conv2d_layer


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: Ctx) -> Layer:
    k = op.kernel[0] * op.kernel[1]

    def maxpool2d_layer(x: Any, run: Run) -> Any:
        xp = _pad(x, run, site, op.padding, ctx.const(-np.inf))  # padded cells never win
        stacked = pt.stack(_taps(xp, site, op.kernel, op.stride), axis=-1)  # (N, Ho, Wo, C, K)
        first = pt.argmax(stacked, axis=-1, keepdims=True)  # the first maximum on ties
        chosen = pt.eq(pt.arange(k), first)  # one-hot over the window
        return pt.sum(pt.switch(chosen, stacked, ctx.const(0.0)), axis=-1)  # (N, Ho, Wo, C)

    return maxpool2d_layer


def relu(op: ops.ReLU, site: Site, ctx: Ctx) -> Layer:
    return lambda x, run: pt.switch(x > 0, x, ctx.const(0.0))


def dropout(op: ops.Dropout, site: Site, ctx: Ctx) -> Layer:
    next(ctx.sites)

    def dropout_layer(x: Any, run: Run) -> Any:
        if not run.training or op.rate == 0:
            return x
        rate = ctx.const(op.rate) * ctx.dropout_on  # 0 when switched off
        rng = run.rngs[-1] if run.rngs else ctx.rng  # the generator after the last draw
        next_rng, u = rng.uniform(0.0, 1.0, size=x.shape, dtype=ctx.dtype)
        run.rngs.append(next_rng)
        return pt.switch(u >= rate, x / (ctx.const(1.0) - rate), ctx.const(0.0))

    return dropout_layer


def flatten(op: ops.Flatten, site: Site, ctx: Ctx) -> Layer:
    if op.order != "CHW":
        raise unsupported(NAME, op)
    # (N, H, W, C) -> (N, H*W*C): the next dense kernel's rows were permuted at set_params
    return lambda x, run: x.reshape((x.shape[0], -1))


def dense(op: ops.Dense, site: Site, ctx: Ctx) -> Layer:
    kernel = ctx.shared(f"{op.name}.kernel", (site.in_shape[-1], op.units))  # IO
    bias = ctx.shared(f"{op.name}.bias", (op.units,)) if op.bias else None

    def dense_layer(x: Any, run: Run) -> Any:
        y = pt.dot(x, kernel)  # (N, I) @ (I, O) -> (N, O); (T, N, I): tensordot
        return y if bias is None else y + bias

    return dense_layer


def batchnorm(op: ops.BatchNorm, site: Site, ctx: Ctx) -> Layer:
    shape = (site.in_shape[0],)
    gamma, beta, mean, var = (ctx.shared(f"{op.name}.{r}", shape) for r in
                              ("gamma", "beta", "mean", "var"))  # fmt: skip

    def batchnorm_layer(x: Any, run: Run) -> Any:
        # inference mode; the channel axis is the last one (NHWC, or (N, C))
        return (x - mean) / pt.sqrt(var + ctx.const(op.eps)) * gamma + beta

    return batchnorm_layer


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: Ctx) -> Layer:
    return lambda x, run: pt.mean(x, axis=(1, 2))  # (N, H, W, C) -> (N, C)


def embedding(op: ops.Embedding, site: Site, ctx: Ctx) -> Layer:
    table = ctx.shared(f"{op.name}.table", (op.vocab, op.dim))
    # ids (N, T) -> time-major vectors (T, N, E): what the GRU's scan runs over
    return lambda x, run: table[x.T]


def gru(op: ops.GRU, site: Site, ctx: Ctx) -> Layer:
    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported(NAME, op)
    e, h = site.in_shape[1], op.units
    kernel = ctx.shared(f"{op.name}.kernel", (e, 3 * h))  # gate blocks z | r | h
    recurrent = ctx.shared(f"{op.name}.recurrent_kernel", (h, 3 * h))
    bias_in = ctx.shared(f"{op.name}.bias_input", (3 * h,))
    bias_rec = ctx.shared(f"{op.name}.bias_recurrent", (3 * h,))

    def step(xw_t: Any, state: Any, u: Any, c: Any) -> Any:
        hu = pt.dot(state, u) + c  # (N, 3H): the recurrent side, reset applied after it
        z = pt.sigmoid(xw_t[:, :h] + hu[:, :h])  # update gate
        r = pt.sigmoid(xw_t[:, h : 2 * h] + hu[:, h : 2 * h])  # reset gate
        cand = pt.tanh(xw_t[:, 2 * h :] + r * hu[:, 2 * h :])
        return z * state + (ctx.const(1.0) - z) * cand

    def gru_layer(x: Any, run: Run) -> Any:
        t, n = x.shape[0], x.shape[1]
        # every step's input projection at once: (T*N, E) @ (E, 3H) -> (T, N, 3H)
        xw = pt.dot(x.reshape((t * n, e)), kernel).reshape((t, n, 3 * h)) + bias_in
        h0 = pt.zeros((n, h), dtype=ctx.dtype)  # zero initial state (N, H)
        states = pytensor.scan(
            step, sequences=[xw], outputs_info=[h0], non_sequences=[recurrent, bias_rec],
            return_updates=False,
        )  # fmt: skip
        return states[-1]  # the last step's state (N, H)

    return gru_layer


def _token_mask(run: Run, what: str) -> Any:
    """The (N, T) mask of real tokens the model's sequence made, or a one-line error."""
    if run.valid is None:
        raise BackendError(
            f"backend 'pytensor': {what} reads the padding mask of the model's token ids "
            "(mask: tokens): run it inside a model whose input is token ids"
        )
    return run.valid


def layer_norm(op: ops.LayerNorm, site: Site, ctx: Ctx) -> Layer:
    e = site.in_shape[-1]
    gamma, beta = ctx.shared(f"{op.name}.gamma", (e,)), ctx.shared(f"{op.name}.beta", (e,))
    eps, one = ctx.const(op.eps), ctx.const(1.0)

    def layer_norm_layer(x: Any, run: Run) -> Any:
        xc = x - pt.mean(x, axis=-1, keepdims=True)  # over the last (feature) axis
        var = pt.mean(xc * xc, axis=-1, keepdims=True)  # biased: divided by E
        return xc * (one / pt.sqrt(var + eps)) * gamma + beta  # eps inside the root

    return layer_norm_layer


def gelu(op: ops.GELU, site: Site, ctx: Ctx) -> Layer:
    half, one, root2 = ctx.const(0.5), ctx.const(1.0), ctx.const(math.sqrt(2.0))
    return lambda x, run: half * x * (one + pt.erf(x / root2))  # exact: erf, not tanh


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    t, e = site.in_shape
    table = ctx.shared(f"{op.name}.table", (op.max_len, e))
    # time-major (T, N, E) + the first T rows (T, 1, E)
    return lambda x, run: x + table[:t].dimshuffle(0, "x", 1)


def attention(op: ops.Attention, site: Site, ctx: Ctx) -> Layer:
    t, e = site.in_shape
    h, d = op.heads, site.in_shape[1] // op.heads
    w = {
        role: ctx.shared(f"{op.name}.{role}", (e, e) if role.endswith("kernel") else (e,))
        for role in ops.ATTENTION_ROLES
    }  # kernels IO, columns (rows for the output) in head-major blocks of d: as the spec
    scale = ctx.const(math.sqrt(d))
    # a masked key's score: the dtype's lowest finite value, so exp(score - row max) is exactly 0
    # and a row of masked keys only stays finite (uniform, then zeroed below): never inf - inf
    lowest = ctx.const(np.finfo(ctx.dtype).min)

    def heads(y: Any, n: Any, order: tuple[int, ...]) -> Any:
        return y.reshape((t, n, h, d)).dimshuffle(*order)  # (T*N, E) -> (T, N, H, d) -> order

    def attention_layer(x: Any, run: Run) -> Any:
        valid = _token_mask(run, f"attention {op.name}")  # (N, T)
        n = x.shape[1]
        rows = x.reshape((t * n, e))  # time-major (T, N, E) -> (T*N, E): one dot per projection
        q = heads(pt.dot(rows, w["query_kernel"]) + w["query_bias"], n, (1, 2, 0, 3))  # N,H,T,d
        k_t = heads(pt.dot(rows, w["key_kernel"]), n, (1, 2, 3, 0))  # (N, H, d, T), no bias
        v = heads(pt.dot(rows, w["value_kernel"]) + w["value_bias"], n, (1, 2, 0, 3))
        scores = pt.matmul(q, k_t) / scale  # (N, H, T, T): batched over N and H (BatchedDot)
        keys = valid.dimshuffle(0, "x", "x", 1)  # (N, 1, 1, T): keys that take part
        p = pt.special.softmax(pt.switch(keys, scores, lowest), axis=-1)  # max subtracted: stable
        # a row whose every key is padding attends to nothing: weights 0, gradients 0
        any_key = pt.any(valid, axis=1).astype(ctx.dtype).dimshuffle(0, "x", "x", "x")
        o = pt.matmul(p * any_key, v)  # (N, H, T, d)
        o = o.dimshuffle(2, 0, 1, 3).reshape((t * n, e))  # heads concatenated, time-major rows
        return (pt.dot(o, w["output_kernel"]) + w["output_bias"]).reshape((t, n, e))

    return attention_layer


def masked_mean(op: ops.MaskedMean, site: Site, ctx: Ctx) -> Layer:
    one = ctx.const(1.0)

    def masked_mean_layer(x: Any, run: Run) -> Any:
        valid = _token_mask(run, "masked_mean").astype(ctx.dtype)  # (N, T) 0/1
        count = pt.maximum(pt.sum(valid, axis=1, keepdims=True), one)  # (N, 1): 0 tokens -> 1
        weight = (valid / count).T.dimshuffle(0, 1, "x")  # (T, N, 1): 0 at padding
        return pt.sum(x * weight, axis=0)  # time-major (T, N, E) -> (N, E); 0 tokens: 0

    return masked_mean_layer


def sequence(layers: list[Layer], site: Site, ctx: Ctx) -> Layer:
    """Layers in order; an empty sequence is the identity (a plain residual shortcut). The
    model's own sequence over token ids makes their padding mask (id != 0) for the masked ops
    (it stays out of the compiled graph where no op reads it)."""
    root = site.path == "" and site.at_input
    tokens = root and len(site.in_shape) == 1
    images = root and len(site.in_shape) == 3

    def sequence_layer(x: Any, run: Run) -> Any:
        if tokens:
            run = run._replace(valid=pt.neq(x, 0))  # (N, T); the same rngs list
        if images:
            run = run._replace(batch=x.shape[0])  # NHWC
        for layer in layers:
            x = layer(x, run)
        return x

    return sequence_layer


def residual(body: Layer, shortcut: Layer, site: Site, ctx: Ctx) -> Layer:
    """``body(x) + shortcut(x)``."""
    return lambda x, run: body(x, run) + shortcut(x, run)


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def input_variable(shape: tuple[int, ...], dtype: str, name: str = "x") -> Any:
    """The symbolic input for per-sample canonical ``shape`` in the native layout: images
    (N, H, W, C), token ids (N, T) int32, a float sequence time-major (T, N, E), features."""
    if len(shape) == 3:
        c, h, w = shape
        return pt.tensor(name, dtype=dtype, shape=(None, h, w, c))
    if dtype.startswith("int"):
        return pt.tensor(name, dtype=dtype, shape=(None, shape[0]))
    if len(shape) == 2:
        return pt.tensor(name, dtype=dtype, shape=(shape[0], None, shape[1]))
    return pt.tensor(name, dtype=dtype, shape=(None, *shape))


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch, compiled with the runtime's linker
    (dropout draws from ``runtime.seed``)."""
    ctx = Ctx(runtime.dtype, seed=runtime.seed)
    in_shape = tuple(x.shape[1:])
    layer = lower_op(TABLE, op, in_shape, ctx)
    xa = np.asarray(x, dtype=runtime.dtype)
    xn = weights.image_to_native(xa) if xa.ndim == 4 else xa
    xv = pt.tensor("x", dtype=runtime.dtype, shape=(None, *xn.shape[1:]))
    mode = settings.mode(settings.resolve_linker(runtime.pytensor_linker), runtime.threads)
    run = Run(training, [])
    y = layer(xv, run)
    fn = pytensor.function([xv], y, updates=run.update(ctx), mode=mode)
    y = np.asarray(fn(xn))
    if isinstance(op, ops.Flatten) and xa.ndim == 4:
        return weights.flat_to_canonical(y, xa.shape[1:])
    return weights.image_to_canonical(y) if y.ndim == 4 else y
