"""Paddle's side of the table: the ``nn`` layers the op modules build, and how they compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and ``weights`` side by
side). This file holds what several of them share: the build context :class:`Build` (which layer
owns the parameters of which op, for ``weights.py``), :func:`default_dtype` around the walk
(Paddle creates parameters in its default dtype, so layers are made in the build's dtype), the
layers Paddle lacks (:class:`LastStepGRU`; :class:`GatedDropout`, whose rate is a tensor the step
reads, so that the gate can switch it off inside the very program that is timed
(``Model.set_dropout``), also under ``paddle.jit.to_static``; :class:`LayerNorm`,
:class:`PositionEmbedding`, :class:`SelfAttention` and :class:`CausalSelfAttention` (with
:class:`Decoding`, the generation state they share: the offset and the static KV caches),
:class:`TiedLinear` (a head reading an embedding's weight), :class:`MaskedMean`; the masked
sequences; the variadic :class:`Sum`, :class:`Product`, :class:`Concat`, their inputs as
arguments), and how layers compose: a sequence is an ``nn.Sequential``, a residual block a
:class:`Residual`, a wired graph a :class:`Graph` (its layers in an ``nn.LayerList``, each run on
the outputs it names, the token mask handed to those that take it); ``print(net)`` is the
architecture. ``TABLE`` is the
native face of ``source.OPS``.

Nothing here converts weights: each op module's ``weights`` holds its layout and gate-order
conversions. Activations are NCHW (Paddle's default ``data_format``), so ``Flatten`` is
channel-major (the spec's ``CHW``) and ``fc1`` needs no row permutation.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, Wiring, last_readers, lower_op
from rosetta.backends.paddle.compat import paddle
from rosetta.backends.paddle.source import OPS
from rosetta.runtime import Runtime

NAME = "paddle"
nn, F = paddle.nn, paddle.nn.functional


@contextlib.contextmanager
def default_dtype(dtype: str) -> Iterator[None]:
    """Paddle's default dtype set to ``dtype`` while layers are made (their parameters take it),
    restored afterwards."""
    was = paddle.get_default_dtype()
    paddle.set_default_dtype(dtype)
    try:
        yield
    finally:
        paddle.set_default_dtype(was)


class Decoding:
    """A decoder generating, shared by its position embedding and causal attentions: while
    ``active``, the input holds the positions from ``offset`` on, and each attention keeps its
    keys and values in a static cache (``capacity`` positions, allocated at the prefill and
    written in place at the offset: the KV cache of PaddleNLP's generation, of a static
    shape)."""

    def __init__(self) -> None:
        self.active = False
        self.offset = 0
        self.capacity = 0
        self.cache: dict[int, tuple[paddle.Tensor, paddle.Tensor]] = {}  # (N, capacity, H, d)

    def start(self, capacity: int) -> None:
        """A new generation: no position seen, the caches dropped."""
        self.offset, self.capacity, self.cache = 0, capacity, {}


@dataclass
class Build:
    """The build context: ``(op, layer holding its parameters)`` for every parameterised op,
    in graph order, filled in by the entries as the driver walks the graph; ``decoding`` the
    generation state the position embeddings and causal attentions share."""

    owners: list[tuple[object, nn.Layer]] = field(default_factory=list)
    decoding: Decoding = field(default_factory=Decoding)

    def own(self, op: object, layer: nn.Layer) -> None:
        """Record that ``layer``'s tensors are ``op``'s parameters."""
        self.owners.append((op, layer))


class Residual(nn.Layer):
    """``body(x) + shortcut(x)``; an empty shortcut is the identity (ResNet's bottleneck add)."""

    def __init__(self, body: nn.Layer, shortcut: nn.Layer) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.body(x) + self.shortcut(x)


class LastStepGRU(nn.Layer):
    """``nn.GRU`` over batch-major ``(N, T, E)`` from a zero state; returns the last state."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=1, direction="forward")

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        _, h_n = self.gru(x)  # h_n: (num_layers=1, N, H)
        return h_n[0]  # (N, H): the last step's state


class LastStepLSTM(nn.Layer):
    """``nn.LSTM`` over batch-major ``(N, T, E)`` from a zero state and cell; returns the last
    state. Its second bias ``bias_hh_l0`` is held at zero: the spec's one bias
    (``rosetta.spec.ops.LSTM``). It starts at zero and its gradient is zeroed by a hook, so no
    optimiser here moves it (SGD, momentum and Adam steps of a zero gradient are zero, and decay
    of a zero is zero). Paddle's fused rnn kernel refuses the simpler forms: ``stop_gradient``
    on one of its weights fails its backward (a null gradient tensor), and
    ``bias_hh_attr=False`` crashed the process (SIGSEGV, Paddle 3 on the CPU)."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=1, direction="forward")
        self.lstm.bias_hh_l0.set_value(paddle.zeros_like(self.lstm.bias_hh_l0))
        self.lstm.bias_hh_l0.register_hook(paddle.zeros_like)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        _, (h_n, _) = self.lstm(x)  # h_n: (num_layers=1, N, H)
        return h_n[0]  # (N, H): the last step's state


class GatedDropout(nn.Layer):
    """Inverted dropout (the spec's rule: zero with probability ``rate``, scale the rest by
    ``1 / (1 - rate)``; identity in ``eval()``) whose rate is a 0-d buffer, not a Python float.

    The rate is therefore an *input* of the step: writing 0 keeps every element (``rand >= 0``
    always holds and the scale is exactly 1, so the output is ``x`` bit for bit) without changing
    the code that runs; under ``paddle.jit.to_static`` the buffer is an input of the static
    program, so toggling it neither retraces nor rebuilds it (``nn.Dropout``'s ``p``, a float,
    would be a constant of the program). The random numbers are drawn in both cases."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.spec_rate = float(rate)
        self.register_buffer(
            "rate", paddle.to_tensor(self.spec_rate, dtype=paddle.get_default_dtype()),
            persistable=False,
        )  # fmt: skip

    def set_rate(self, rate: float) -> None:
        """Write the rate the next step reads (in place: the same tensor, dtype and device)."""
        with paddle.no_grad():
            self.rate.set_value(np.asarray(rate, dtype=self.rate.numpy().dtype))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if not self.training:
            return x
        keep = (paddle.rand(x.shape, dtype=x.dtype) >= self.rate).astype(x.dtype)  # P = 1 - rate
        return x * keep / (1 - self.rate)

    def extra_repr(self) -> str:
        return f"rate={self.spec_rate} (a buffer: set_dropout(False) writes 0)"


class MaskedSequential(nn.Sequential):
    """Layers in order, handing the (N, T) mask of real tokens to the layers that take it
    (``takes_mask``): a residual branch holding masked ops. The value stays one tensor."""

    takes_mask = True

    def forward(self, x: paddle.Tensor, valid: paddle.Tensor) -> paddle.Tensor:  # type: ignore[override]
        for layer in self.children():
            x = layer(x, valid) if getattr(layer, "takes_mask", False) else layer(x)
        return x


class TokenSequential(nn.Sequential):
    """The model's own sequence over token ids: makes the mask of real tokens (id != 0) once
    and hands it down to the layers that take it."""

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:  # type: ignore[override]
        valid = x != 0  # (N, T) bool
        for layer in self.children():
            x = layer(x, valid) if getattr(layer, "takes_mask", False) else layer(x)
        return x


class MaskedResidual(Residual):
    """``body(x, valid) + shortcut(x, valid)`` for branches that hold masked ops."""

    takes_mask = True

    def forward(self, x: paddle.Tensor, valid: paddle.Tensor) -> paddle.Tensor:  # type: ignore[override]
        def run(branch: nn.Layer) -> paddle.Tensor:
            return branch(x, valid) if getattr(branch, "takes_mask", False) else branch(x)

        return run(self.body) + run(self.shortcut)


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` over the last axis (biased variance, ``eps`` inside the root). In float64
    the same formula in Paddle ops: the ``layer_norm`` kernel takes ``epsilon`` as a float32
    attribute (Paddle 3.3.1), so in float64 it computes with 1e-5 rounded to float32 (measured
    on inputs of the embeddings' scale: 5.8e-11 of the output off the reference, 5e-16 off the
    reference run with that rounded epsilon; through the model the float64 gate saw 7x its
    bound on the edge-case batch). In float32 that
    rounding is the dtype's own and Paddle's kernel runs; in float64 ``eps`` is a 0-d buffer of
    the model's dtype and the normalisation is written out (the reference's order)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__(dim, epsilon=eps)
        self.written_out = paddle.get_default_dtype() == "float64"
        if self.written_out:
            eps_t = paddle.to_tensor(eps, dtype=paddle.get_default_dtype())
            self.register_buffer("eps", eps_t, persistable=False)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if not self.written_out:
            return super().forward(x)
        xc = x - x.mean(axis=-1, keepdim=True)
        rstd = 1 / paddle.sqrt((xc * xc).mean(axis=-1, keepdim=True) + self.eps)
        return xc * rstd * self.weight + self.bias


class PositionEmbedding(nn.Layer):
    """Learned positions: ``x + table[:T]`` on (N, T, E); generating (``decoding``), the rows
    from the positions already seen on."""

    def __init__(self, max_len: int, dim: int, decoding: Decoding | None = None) -> None:
        super().__init__()
        self.table = self.create_parameter([max_len, dim], dtype=paddle.get_default_dtype())
        self.decoding = decoding

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        d = self.decoding
        start = d.offset if d is not None and d.active else 0
        return x + self.table[start : start + x.shape[1]]  # (N, T, E) + (T, E)


class SelfAttention(nn.Layer):
    """Multi-head self-attention composed from ``paddle.matmul`` and ``F.softmax`` with the
    spec's key padding mask (a masked key: score -inf, weight exactly 0).

    Not ``F.scaled_dot_product_attention``: in Paddle 3.3 on the CPU it is this same composition
    in Python (``_math_attention``: no fused kernel to gain), with the boolean mask made an
    additive -inf, so a query whose every key is padding gets softmax(-inf, ..., -inf) = NaN
    where the spec's rule is 0. Here such a row unmasks every key (a finite softmax, nothing to
    0/0) and its head outputs are multiplied by 0, so its output is ``bo`` and no gradient flows
    through it. ``sqrt(d)`` is a 0-d buffer of the model's dtype (``scores / sqrt_d``, the
    reference's division), so no Python float becomes an op attribute rounded to float32.
    :meth:`_heads` and :meth:`_attend` are the two halves :class:`CausalSelfAttention` shares."""

    takes_mask = True

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim, bias_attr=False)  # the softmax cancels a key bias
        self.value = nn.Linear(dim, dim)
        self.output = nn.Linear(dim, dim)
        dtype = paddle.get_default_dtype()
        self.register_buffer(
            "sqrt_d", paddle.to_tensor(math.sqrt(dim // heads), dtype=dtype), persistable=False
        )
        self.register_buffer(
            "neg_inf", paddle.to_tensor(float("-inf"), dtype=dtype), persistable=False
        )

    def _heads(self, x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor]:
        """The query, key and value of (N, T, E), each (N, T, H, d): the heads are head-major
        column blocks (Paddle's own attention layout, ``F.scaled_dot_product_attention``'s)."""
        n, t, e = x.shape
        return tuple(
            p(x).reshape([n, t, self.heads, e // self.heads])  # (N, T, E) -> (N, T, H, d)
            for p in (self.query, self.key, self.value)
        )

    def _attend(
        self, q: paddle.Tensor, k: paddle.Tensor, v: paddle.Tensor, keep: paddle.Tensor
    ) -> paddle.Tensor:
        """``softmax(q k^T / sqrt(d)) v`` per head on (N, T, H, d), the keys where ``keep`` (a
        boolean broadcast to (N, H, T, T)) is False scoring -inf: weight exactly 0."""
        q, k, v = (a.transpose([0, 2, 1, 3]) for a in (q, k, v))  # (N, H, T, d)
        scores = paddle.matmul(q, k, transpose_y=True) / self.sqrt_d  # (N, H, T, T)
        weights = F.softmax(paddle.where(keep, scores, self.neg_inf), axis=-1)  # stable
        return paddle.matmul(weights, v).transpose([0, 2, 1, 3])  # (N, T, H, d)

    def forward(self, x: paddle.Tensor, valid: paddle.Tensor) -> paddle.Tensor:
        n, t, e = x.shape
        any_key = valid.any(axis=1, keepdim=True)  # (N, 1): False for padding only
        keep = (valid | ~any_key).unsqueeze([1, 2])  # (N, 1, 1, T)
        o = self._attend(*self._heads(x), keep) * any_key.astype(x.dtype).unsqueeze([2, 3])
        return self.output(o.reshape([n, t, e]))  # (N, T, H, d) -> (N, T, E): heads concatenated


class CausalSelfAttention(SelfAttention):
    """Multi-head causal self-attention (query ``i`` reads keys ``j <= i``, no padding mask): the
    projections of :class:`SelfAttention`, then, in float32, Paddle's own
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` on its (N, T, H, d) layout (no
    transposes in this code; on a GPU Paddle picks its flash kernel where the dtype allows, on
    the CPU it runs ``_math_attention``: ``q * scale``, an additive -1e4 upper triangle, softmax,
    passing the float32 gate). In float64 :meth:`SelfAttention._attend` under the (T, T) lower
    triangle: the reference's order (scores divided by ``sqrt(d)``, later keys -inf, weight
    exactly 0), where Paddle's path scales ``q`` first and masks by adding -1e4. Every row reads
    at least its own key, so no row is empty. Generating (``decoding`` active), the keys and
    values go through the static cache (:meth:`_cached`)."""

    takes_mask = False

    def __init__(self, dim: int, heads: int, decoding: Decoding | None = None) -> None:
        super().__init__(dim, heads)
        self.fused = paddle.get_default_dtype() == "float32"
        self.decoding = decoding

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:  # type: ignore[override]
        n, t, e = x.shape
        q, k, v = self._heads(x)  # (N, T, H, d)
        if self.decoding is not None and self.decoding.active:
            o = self._cached(q, k, v, self.decoding)
        elif self.fused:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (N, T, H, d)
        else:
            earlier = paddle.arange(t).unsqueeze(1) >= paddle.arange(t)  # (T, T): key j <= i
            o = self._attend(q, k, v, earlier)
        return self.output(o.reshape([n, t, e]))  # (N, T, H, d) -> (N, T, E): heads concatenated

    def _cached(
        self, q: paddle.Tensor, k: paddle.Tensor, v: paddle.Tensor, d: Decoding
    ) -> paddle.Tensor:
        """The new positions' attention over the cache, on (N, t, H, d): their keys and values
        written in place at ``offset`` into this layer's static buffers (N, capacity, H, d),
        their queries reading every key up to their own position: the prefill is the causal
        attention above over its own keys, one new token reads every key so far (no mask);
        several after a prefix, the composed core under the shifted lower triangle."""
        t = k.shape[1]
        if id(self) not in d.cache:  # the prefill: buffers for the whole context
            shape = [k.shape[0], d.capacity, k.shape[2], k.shape[3]]
            d.cache[id(self)] = (paddle.zeros(shape, k.dtype), paddle.zeros(shape, v.dtype))
        kc, vc = d.cache[id(self)]
        end = d.offset + t
        kc[:, d.offset : end] = k  # positions offset..end-1, in place
        vc[:, d.offset : end] = v
        keys, values = kc[:, :end], vc[:, :end]  # (N, end, H, d)
        if self.fused and (d.offset == 0 or t == 1):
            return F.scaled_dot_product_attention(q, keys, values, is_causal=d.offset == 0)
        earlier = paddle.arange(d.offset, end).unsqueeze(1) >= paddle.arange(end)  # (t, end)
        return self._attend(q, keys, values, earlier)

    def extra_repr(self) -> str:
        form = "F.scaled_dot_product_attention(is_causal=True)" if self.fused else "composed"
        return f"heads={self.heads}, {form}"


class TiedLinear(nn.Layer):
    """``x @ table^T``: a bias-free linear layer whose weight *is* an ``nn.Embedding``'s own
    ``(V, E)`` weight (the same Parameter, as PaddleNLP's GPT head reads its word embeddings'),
    so autograd adds both uses' gradients into its one ``grad``; ``parameters()`` lists it once."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.weight = embedding.weight  # (V, E): the same Parameter, registered here again

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.matmul(x, self.weight, transpose_y=True)  # (..., E) @ (E, V) -> (..., V)

    def extra_repr(self) -> str:
        v, e = self.weight.shape
        return f"tied: the embedding's weight ({v}, {e}), x @ weight^T"


class MaskedMean(nn.Layer):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only."""

    takes_mask = True

    def forward(self, x: paddle.Tensor, valid: paddle.Tensor) -> paddle.Tensor:
        w = valid.astype(x.dtype)  # (N, T)
        total = (x * w.unsqueeze(-1)).sum(axis=1)  # (N, E)
        return total / w.sum(axis=1, keepdim=True).clip(min=1)


class Sum(nn.Layer):
    """The elementwise sum of its inputs, a new tensor (an input may be read elsewhere)."""

    def forward(self, *xs):
        out = xs[0] + xs[1]
        for x in xs[2:]:
            out = out + x
        return out


class Product(nn.Layer):
    """The elementwise product of its inputs, a new tensor."""

    def forward(self, *xs):
        out = xs[0] * xs[1]
        for x in xs[2:]:
            out = out * x
        return out


class Concat(nn.Layer):
    """``paddle.concat`` of its inputs along ``axis``."""

    def __init__(self, axis: int) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, *xs):
        return paddle.concat(list(xs), axis=self.axis)


class Clip(nn.Layer):
    """``paddle.clip`` with bounds in the input's dtype (``nn.Hardtanh`` holds them as float32
    attributes: a float64 model clipped at 0.30000001, measured 1.2e-8 off the spec's 0.3)."""

    def __init__(self, lo: float, hi: float) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi

    def forward(self, x):
        lo = paddle.full([], self.lo, dtype=x.dtype)
        hi = paddle.full([], self.hi, dtype=x.dtype)
        return paddle.clip(x, lo, hi)


class Graph(nn.Layer):
    """Layers wired by index (``rosetta.spec.ops.Graph``): layer ``j`` runs on the outputs of
    the layers ``inputs[j]`` (-1: the graph's input; several: a variadic layer, given them as
    arguments), the last one's output is the graph's; each value dropped once its last reader has
    run; the mask handed to the layers that take it."""

    def __init__(self, layers: list[nn.Layer], inputs: tuple[tuple[int, ...], ...]) -> None:
        super().__init__()
        self.layers = nn.LayerList(layers)
        self.inputs = inputs
        self.frees = last_readers(inputs)  # per layer, the values freed after it runs
        self.takes_mask = _masked(layers)

    def forward(self, x, valid=None):
        values = {-1: x}
        out = x
        for j, (layer, src) in enumerate(zip(self.layers, self.inputs, strict=True)):
            args = [values[k] for k in src]
            if getattr(layer, "takes_mask", False):
                args.append(valid)
            out = layer(*args)
            for k in self.frees[j]:  # dropped after their last reader
                del values[k]
            values[j] = out
        return out


def _masked(layers: list[nn.Layer]) -> bool:
    return any(getattr(m, "takes_mask", False) for m in layers)


def sequence(layers: list[nn.Layer], site: Site, ctx: Build) -> nn.Layer:
    """Layers in order: an ``nn.Sequential`` (empty: the identity); with masked ops, the
    model's own sequence makes the token mask and branches pass it on."""
    if not _masked(layers):
        return nn.Sequential(*layers)
    if site.path == "" and len(site.in_shape) == 1:
        return TokenSequential(*layers)
    return MaskedSequential(*layers)


def residual(body: nn.Layer, shortcut: nn.Layer, site: Site, ctx: Build) -> nn.Layer:
    """``body(x) + shortcut(x)``."""
    if _masked([body, shortcut]):
        return MaskedResidual(body, shortcut)
    return Residual(body, shortcut)


def graph(layers: list[nn.Layer], wiring: Wiring, site: Site, ctx: Build) -> nn.Layer:
    """A wired graph: :class:`Graph` (its layers in an ``nn.LayerList``)."""
    return Graph(layers, wiring.inputs)


TABLE: LoweringTable[nn.Layer] = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch in the runtime's dtype (dropout masks from
    ``runtime.seed``)."""
    with default_dtype(runtime.dtype):
        layer = lower_op(TABLE, op, tuple(x.shape[1:]), Build())
    layer.train() if training else layer.eval()
    paddle.seed(runtime.seed)
    xt = paddle.to_tensor(np.asarray(x, dtype=runtime.dtype))
    with paddle.no_grad():
        return layer(xt).numpy()
