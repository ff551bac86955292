"""The reference's layers: each op as ``layer(x, ctx) -> (y, back)`` over the kernels.

A layer runs its op's forward (the kernels of ``conv.py``, ``nn.py``, ``rnn.py``) and returns a
closure mapping the output gradient to the input gradient while adding the op's parameter
gradients to ``ctx.grads``. A sequence records these closures on a tape and its backward plays
the tape in reverse (micrograd's idea, one layer at a time); a residual block adds its two
branches and sends the gradient down both; a wired graph runs its layers in order, each on the
outputs it names, and its backward sums the gradients of every output read more than once. A
variadic layer (``add``, ``concat``) takes the list of its inputs and its backward returns one
gradient per input.

Written once, used twice: ``lowering.py`` makes these layers from the spec's ops, and the
generated NumPy file (``rosetta code WORKLOAD --backend numpy_ref``) carries this module's
definitions verbatim, so the file computes exactly what the reference computes. Hence the
factories take plain values (names, numbers), not spec ops, and call the kernels by their own
names (the generated file defines them at its top level).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rosetta.backends.numpy_ref.conv import (
    avgpool2d_backward,
    avgpool2d_forward,
    conv2d_backward,
    conv2d_forward,
    global_avgpool_backward,
    global_avgpool_forward,
    grouped_conv2d_backward,
    grouped_conv2d_forward,
    maxpool2d_backward,
    maxpool2d_forward,
)
from rosetta.backends.numpy_ref.nn import (
    add_backward,
    add_forward,
    batchnorm_backward,
    batchnorm_forward,
    clip_backward,
    clip_forward,
    concat_backward,
    concat_forward,
    dense_backward,
    dense_forward,
    dropout_backward,
    dropout_forward,
    dropout_mask,
    embedding_backward,
    embedding_forward,
    flatten_backward,
    flatten_forward,
    hardswish_backward,
    hardswish_forward,
    mul_backward,
    mul_forward,
    relu_backward,
    relu_forward,
    sigmoid_backward,
    sigmoid_forward,
    softmax_backward,
    softmax_forward,
    tanh_backward,
    tanh_forward,
)
from rosetta.backends.numpy_ref.rnn import gru_backward, gru_forward, lstm_backward, lstm_forward
from rosetta.backends.numpy_ref.seq import (
    attention_backward,
    attention_forward,
    cached_attention,
    causal_mask,
    gelu_backward,
    gelu_forward,
    layer_norm_backward,
    layer_norm_forward,
    masked_mean_backward,
    masked_mean_forward,
    position_backward,
    position_forward,
)

Backward = Callable[[np.ndarray], "np.ndarray | None"]


@dataclass
class Decode:
    """A decoder generating: ``offset`` positions seen so far (the next input's first position)
    and each causal attention's keys and values of those positions (its KV cache, by name)."""

    offset: int = 0
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


@dataclass
class Ctx:
    """What a layer needs besides its input: parameters, gradient sink, mode, dropout rng."""

    params: dict[str, np.ndarray]
    training: bool
    rng: np.random.Generator | None
    grads: dict[str, np.ndarray] = field(default_factory=dict)
    #: (N, T) bool, True at real tokens: made from the model's token-id input by the top-level
    #: sequence (``sequential(..., tokens=True)``), read by every op with ``mask: tokens``
    valid: np.ndarray | None = None
    #: False for a forward alone (predict): the sequences and graphs keep no tape, so each
    #: layer's cache is freed once the layers after it no longer need its output
    backward: bool = True
    #: generating (forward only): the positions already seen and the KV caches; the input holds
    #: the positions after them (a prompt, then one token a step)
    decode: Decode | None = None

    def acc(self, name: str, grad: np.ndarray) -> None:
        """Add ``grad`` to the gradient of parameter ``name`` (a parameter may be used twice)."""
        if name in self.grads:
            self.grads[name] = self.grads[name] + grad
        else:
            self.grads[name] = grad


Layer = Callable[[np.ndarray, Ctx], "tuple[np.ndarray, Backward]"]


def conv2d(
    name: str, stride: tuple[int, int], padding: tuple[int, ...], bias: bool, groups: int = 1
) -> Layer:
    """Convolution with the parameters ``<name>.kernel`` (OIHW) and ``<name>.bias``; ``groups``
    > 1: grouped (depthwise where it equals the channels)."""

    def conv2d_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        b = ctx.params[f"{name}.bias"] if bias else None
        w = ctx.params[f"{name}.kernel"]
        if groups == 1:
            y, cache = conv2d_forward(x, w, b, stride, padding)
        else:
            y, cache = grouped_conv2d_forward(x, w, b, stride, padding, groups)

        def back(dy: np.ndarray) -> np.ndarray:
            if groups == 1:
                dx, dw, db = conv2d_backward(dy, cache)
            else:
                dx, dw, db = grouped_conv2d_backward(dy, cache)
            ctx.acc(f"{name}.kernel", dw)
            if bias:
                ctx.acc(f"{name}.bias", db)
            return dx

        return y, back

    return conv2d_layer


def maxpool2d(kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, ...]) -> Layer:
    """Max pooling; padding never wins the max."""

    def maxpool2d_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = maxpool2d_forward(x, kernel, stride, padding)
        return y, lambda dy: maxpool2d_backward(dy, cache)

    return maxpool2d_layer


def avgpool2d(
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, ...],
    count_include_pad: bool,
) -> Layer:
    """Average pooling over zero padding; ``count_include_pad``: padded zeros counted in the
    divisor (else each window divides by its real cells)."""

    def avgpool2d_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = avgpool2d_forward(x, kernel, stride, padding, count_include_pad)
        return y, lambda dy: avgpool2d_backward(dy, cache)

    return avgpool2d_layer


def relu() -> Layer:
    """max(x, 0)."""

    def relu_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = relu_forward(x)
        return y, lambda dy: relu_backward(dy, cache)

    return relu_layer


def sigmoid() -> Layer:
    """1 / (1 + exp(-x))."""

    def sigmoid_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = sigmoid_forward(x)
        return y, lambda dy: sigmoid_backward(dy, cache)

    return sigmoid_layer


def tanh() -> Layer:
    """tanh(x)."""

    def tanh_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = tanh_forward(x)
        return y, lambda dy: tanh_backward(dy, cache)

    return tanh_layer


def softmax() -> Layer:
    """exp(x - max) / sum(exp(x - max)) over the last axis of the batched array (the caller
    maps the spec's last axis there: channels-first, it is the array's own last axis)."""

    def softmax_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = softmax_forward(x)
        return y, lambda dy: softmax_backward(dy, cache)

    return softmax_layer


def hardswish() -> Layer:
    """x * min(max(x + 3, 0), 6) / 6."""

    def hardswish_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = hardswish_forward(x)
        return y, lambda dy: hardswish_backward(dy, cache)

    return hardswish_layer


def clip(lo: float, hi: float) -> Layer:
    """min(max(x, lo), hi)."""

    def clip_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = clip_forward(x, lo, hi)
        return y, lambda dy: clip_backward(dy, cache)

    return clip_layer


def mul() -> Layer:
    """The elementwise product of its inputs (a list); one gradient per input."""

    def mul_layer(xs: list[np.ndarray], ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = mul_forward(*xs)
        return y, lambda dy: mul_backward(dy, cache)

    return mul_layer


def dropout(rate: float) -> Layer:
    """Inverted dropout in training mode, the identity otherwise."""

    def dropout_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        mask = dropout_mask(x.shape, rate, ctx.rng) if ctx.training and rate > 0 else None
        y, cache = dropout_forward(x, rate, mask)
        return y, lambda dy: dropout_backward(dy, cache)

    return dropout_layer


def flatten() -> Layer:
    """(N, C, H, W) -> (N, C*H*W), channel-major."""

    def flatten_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = flatten_forward(x)  # (N, C, H, W) -> (N, C*H*W), channel-major
        return y, lambda dy: flatten_backward(dy, cache)

    return flatten_layer


def dense(name: str, bias: bool) -> Layer:
    """``x @ <name>.kernel (IO) + <name>.bias``."""

    def dense_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        b = ctx.params[f"{name}.bias"] if bias else None
        y, cache = dense_forward(x, ctx.params[f"{name}.kernel"], b)

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dw, db = dense_backward(dy, cache)
            ctx.acc(f"{name}.kernel", dw)
            if bias:
                ctx.acc(f"{name}.bias", db)
            return dx

        return y, back

    return dense_layer


def batchnorm(name: str, eps: float) -> Layer:
    """Inference-mode batch normalisation on the running statistics ``<name>.mean/var``."""

    def batchnorm_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        p = ctx.params
        y, cache = batchnorm_forward(
            x, p[f"{name}.gamma"], p[f"{name}.beta"], p[f"{name}.mean"], p[f"{name}.var"], eps
        )

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dgamma, dbeta = batchnorm_backward(dy, cache)
            ctx.acc(f"{name}.gamma", dgamma)
            ctx.acc(f"{name}.beta", dbeta)
            return dx

        return y, back

    return batchnorm_layer


def global_avgpool() -> Layer:
    """(N, C, H, W) -> (N, C): the mean over H, W."""

    def global_avgpool_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = global_avgpool_forward(x)  # (N, C, H, W) -> (N, C)
        return y, lambda dy: global_avgpool_backward(dy, cache)

    return global_avgpool_layer


def embedding(name: str) -> Layer:
    """Token ids (N, T) -> rows of ``<name>.table``, (N, T, E)."""

    def embedding_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = embedding_forward(x, ctx.params[f"{name}.table"])  # (N, T) -> (N, T, E)

        def back(dy: np.ndarray) -> None:
            ctx.acc(f"{name}.table", embedding_backward(dy, cache))
            return None  # token ids have no gradient

        return y, back

    return embedding_layer


GRU_ROLES = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
LSTM_ROLES = ("kernel", "recurrent_kernel", "bias")


def _recurrent(name: str, roles: tuple[str, ...], forward: Callable, backward: Callable) -> Layer:
    """A recurrent layer over (N, T, E) returning the last step's state (N, H): its weights
    ``<name>.<role>`` in ``roles`` order into ``forward``, their gradients out of ``backward``."""

    def recurrent_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = forward(x, *(ctx.params[f"{name}.{role}"] for role in roles))

        def back(dy: np.ndarray) -> np.ndarray:
            dx, *grads = backward(dy, cache)
            for role, g in zip(roles, grads, strict=True):
                ctx.acc(f"{name}.{role}", g)
            return dx

        return y, back

    return recurrent_layer


def gru(name: str) -> Layer:
    """The spec's GRU (z | r | h, reset_after), initial state zero, output the last step."""
    return _recurrent(name, GRU_ROLES, gru_forward, gru_backward)


def lstm(name: str) -> Layer:
    """The spec's LSTM (i | f | g | o, one bias), zero state and cell, output the last step."""
    return _recurrent(name, LSTM_ROLES, lstm_forward, lstm_backward)


def layer_norm(name: str, eps: float) -> Layer:
    """LayerNorm over the last axis with ``<name>.gamma`` and ``<name>.beta``."""

    def layer_norm_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        p = ctx.params
        y, cache = layer_norm_forward(x, p[f"{name}.gamma"], p[f"{name}.beta"], eps)

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dgamma, dbeta = layer_norm_backward(dy, cache)
            ctx.acc(f"{name}.gamma", dgamma)
            ctx.acc(f"{name}.beta", dbeta)
            return dx

        return y, back

    return layer_norm_layer


def gelu() -> Layer:
    """Exact (erf) GELU."""

    def gelu_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = gelu_forward(x)
        return y, lambda dy: gelu_backward(dy, cache)

    return gelu_layer


def position_embedding(name: str) -> Layer:
    """``x + <name>.table[:T]``, (N, T, E)."""

    def position_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        start = ctx.decode.offset if ctx.decode is not None else 0  # generating: later rows
        y, cache = position_forward(x, ctx.params[f"{name}.table"][start:])

        def back(dy: np.ndarray) -> np.ndarray:
            ctx.acc(f"{name}.table", position_backward(dy, cache))
            return dy

        return y, back

    return position_layer


ATTENTION_ROLES = (
    "query_kernel", "query_bias", "key_kernel",
    "value_kernel", "value_bias", "output_kernel", "output_bias",
)  # fmt: skip


def attention(name: str, heads: int) -> Layer:
    """Multi-head self-attention over (N, T, E); padding keys (``ctx.valid``) get weight 0."""

    def attention_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        weights = tuple(ctx.params[f"{name}.{role}"] for role in ATTENTION_ROLES)
        y, cache = attention_forward(x, token_mask(ctx), weights, heads)

        def back(dy: np.ndarray) -> np.ndarray:
            dx, grads = attention_backward(dy, cache)
            for role, g in zip(ATTENTION_ROLES, grads, strict=True):
                ctx.acc(f"{name}.{role}", g)
            return dx

        return y, back

    return attention_layer


def causal_attention(name: str, heads: int) -> Layer:
    """Multi-head causal self-attention over (N, T, E): query ``i`` reads keys ``j <= i``."""

    def causal_attention_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        weights = tuple(ctx.params[f"{name}.{role}"] for role in ATTENTION_ROLES)
        if ctx.decode is not None:  # generating: the new positions over the cached ones
            y, ctx.decode.cache[name] = cached_attention(
                x, ctx.decode.cache.get(name), weights, heads
            )
            return y, _no_backward
        y, cache = attention_forward(x, causal_mask(x.shape[1]), weights, heads)

        def back(dy: np.ndarray) -> np.ndarray:
            dx, grads = attention_backward(dy, cache)
            for role, g in zip(ATTENTION_ROLES, grads, strict=True):
                ctx.acc(f"{name}.{role}", g)
            return dx

        return y, back

    return causal_attention_layer


def _no_backward(dy: np.ndarray) -> np.ndarray:
    raise ValueError("a generating forward has no backward (Ctx.decode is forward only)")


def tied_dense(tie: str) -> Layer:
    """``x @ <tie>.table^T`` (..., E) -> (..., V): the embedding's table as a bias-free kernel;
    its gradient adds to the embedding's (``ctx.acc``)."""

    def tied_dense_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        table = ctx.params[f"{tie}.table"]  # (V, E)
        y, cache = dense_forward(x, table.T, None)  # the table transposed is an IO kernel

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dw, _ = dense_backward(dy, cache)
            ctx.acc(f"{tie}.table", dw.T)  # (E, V) -> (V, E)
            return dx

        return y, back

    return tied_dense_layer


def masked_mean() -> Layer:
    """(N, T, E) -> (N, E): the mean over the real tokens (0 for a row of padding only)."""

    def masked_mean_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = masked_mean_forward(x, token_mask(ctx))
        return y, lambda dy: masked_mean_backward(dy, cache)

    return masked_mean_layer


def token_mask(ctx: Ctx) -> np.ndarray:
    """The (N, T) mask of real tokens the top-level sequence recorded."""
    if ctx.valid is None:
        raise ValueError("a masked op needs the model's token ids: run it inside the model")
    return ctx.valid


def _needs_tape(ctx: Ctx) -> None:
    if not ctx.backward:
        raise RuntimeError("no backward: this forward ran with Ctx(backward=False), no tape kept")


def sequential(layers: list[Layer], tokens: bool = False) -> Layer:
    """Layers in order; the backward plays their closures in reverse. ``tokens``: the input is
    the model's token ids, whose padding (id 0) the masked ops read from ``ctx.valid``."""

    def sequence_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        if tokens:
            ctx.valid = np.asarray(x) != 0  # (N, T): True at real tokens
        tape = []
        for layer in layers:
            x, back = layer(x, ctx)
            if ctx.backward:
                tape.append(back)

        def back(dy: np.ndarray) -> np.ndarray | None:
            _needs_tape(ctx)
            for b in reversed(tape):
                dy = b(dy)
            return dy

        return x, back

    return sequence_layer


def residual(body: Layer, shortcut: Layer) -> Layer:
    """``body(x) + shortcut(x)``; the output gradient flows into both branches."""

    def residual_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        main, main_back = body(x, ctx)
        side, side_back = shortcut(x, ctx)
        y, cache = add_forward(main, side)

        def back(dy: np.ndarray) -> np.ndarray:
            d_main, d_side = add_backward(dy, cache)
            return main_back(d_main) + side_back(d_side)

        return y, back

    return residual_layer


def add() -> Layer:
    """The elementwise sum of its inputs (a list); each input's gradient is the output's."""

    def add_layer(xs: list[np.ndarray], ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = add_forward(*xs)
        return y, lambda dy: add_backward(dy, cache)

    return add_layer


def concat(axis: int) -> Layer:
    """Its inputs (a list) joined along ``axis`` of the batched arrays; the gradient is cut
    back into their parts."""

    def concat_layer(xs: list[np.ndarray], ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = concat_forward(xs, axis)
        return y, lambda dy: concat_backward(dy, cache)

    return concat_layer


def graph(layers: list[Layer], inputs: list[tuple[int, ...]]) -> Layer:
    """Layers wired by index: layer ``j`` reads the outputs of the layers ``inputs[j]`` (-1: the
    graph's input; two or more: a variadic layer, given their list); the last layer's output is
    the graph's. The backward runs the layers' closures in reverse and sums, per output, the
    gradients of every layer that read it."""

    def graph_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        values: list[np.ndarray] = []
        tape = []
        for layer, src in zip(layers, inputs, strict=True):
            args = [x if k < 0 else values[k] for k in src]
            y, back = layer(args if len(src) > 1 else args[0], ctx)
            values.append(y)
            if ctx.backward:
                tape.append(back)

        def back(dy: np.ndarray) -> np.ndarray | None:
            _needs_tape(ctx)
            grads: list = [None] * len(layers)
            grads[-1] = dy
            dx = None
            for j in reversed(range(len(layers))):
                src = inputs[j]
                d = tape[j](grads[j])
                for k, dk in zip(src, d if len(src) > 1 else [d], strict=True):
                    if dk is None:  # the model's token ids: no gradient
                        continue
                    if k < 0:
                        dx = dk if dx is None else dx + dk
                    else:
                        grads[k] = dk if grads[k] is None else grads[k] + dk
            return dx

        return values[-1], back

    return graph_layer
