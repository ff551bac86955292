"""The Rosetta of NumPy: every op of the spec as a NumPy forward with its backward beside it.

``TABLE`` is the reference's lowering (``rosetta.backends.driver``): each entry turns an op into
a *layer*, a function ``layer(x, ctx) -> (y, back)`` that runs the op's forward (the kernels of
``conv.py``, ``nn.py``, ``rnn.py``) and returns a closure mapping the output gradient to the
input gradient while adding the op's parameter gradients to ``ctx.grads``. A sequence records
these closures on a tape and its backward plays the tape in reverse (micrograd's idea, one layer
at a time); a residual block adds its two branches and sends the gradient down both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, lower_op
from rosetta.backends.numpy_ref import conv, nn, rnn
from rosetta.backends.numpy_ref.loader import as_input
from rosetta.backends.numpy_ref.source import OPS
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "numpy_ref"
Backward = Callable[[np.ndarray], "np.ndarray | None"]


@dataclass
class Ctx:
    """What a layer needs besides its input: parameters, gradient sink, mode, dropout rng."""

    params: dict[str, np.ndarray]
    training: bool
    rng: np.random.Generator
    grads: dict[str, np.ndarray] = field(default_factory=dict)

    def acc(self, name: str, grad: np.ndarray) -> None:
        """Add ``grad`` to the gradient of parameter ``name`` (a parameter may be used twice)."""
        if name in self.grads:
            self.grads[name] = self.grads[name] + grad
        else:
            self.grads[name] = grad


Layer = Callable[[np.ndarray, Ctx], tuple[np.ndarray, Backward]]


def conv2d(op: ops.Conv2D, site: Site, build: None) -> Layer:
    def conv2d_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        bias = ctx.params[f"{op.name}.bias"] if op.bias else None
        y, cache = conv.conv2d_forward(
            x, ctx.params[f"{op.name}.kernel"], bias, op.stride, op.padding
        )

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dw, db = conv.conv2d_backward(dy, cache)
            ctx.acc(f"{op.name}.kernel", dw)
            if op.bias:
                ctx.acc(f"{op.name}.bias", db)
            return dx

        return y, back

    return conv2d_layer


def maxpool2d(op: ops.MaxPool2D, site: Site, build: None) -> Layer:
    def maxpool2d_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = conv.maxpool2d_forward(x, op.kernel, op.stride, op.padding)
        return y, lambda dy: conv.maxpool2d_backward(dy, cache)

    return maxpool2d_layer


def relu(op: ops.ReLU, site: Site, build: None) -> Layer:
    def relu_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = nn.relu_forward(x)
        return y, lambda dy: nn.relu_backward(dy, cache)

    return relu_layer


def dropout(op: ops.Dropout, site: Site, build: None) -> Layer:
    def dropout_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        mask = nn.dropout_mask(x.shape, op.rate, ctx.rng) if ctx.training and op.rate > 0 else None
        y, cache = nn.dropout_forward(x, op.rate, mask)
        return y, lambda dy: nn.dropout_backward(dy, cache)

    return dropout_layer


def flatten(op: ops.Flatten, site: Site, build: None) -> Layer:
    def flatten_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = nn.flatten_forward(x)  # (N, C, H, W) -> (N, C*H*W), channel-major
        return y, lambda dy: nn.flatten_backward(dy, cache)

    return flatten_layer


def dense(op: ops.Dense, site: Site, build: None) -> Layer:
    def dense_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        bias = ctx.params[f"{op.name}.bias"] if op.bias else None
        y, cache = nn.dense_forward(x, ctx.params[f"{op.name}.kernel"], bias)

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dw, db = nn.dense_backward(dy, cache)
            ctx.acc(f"{op.name}.kernel", dw)
            if op.bias:
                ctx.acc(f"{op.name}.bias", db)
            return dx

        return y, back

    return dense_layer


def batchnorm(op: ops.BatchNorm, site: Site, build: None) -> Layer:
    def batchnorm_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        p = ctx.params
        n = op.name
        y, cache = nn.batchnorm_forward(
            x, p[f"{n}.gamma"], p[f"{n}.beta"], p[f"{n}.mean"], p[f"{n}.var"], op.eps
        )

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dgamma, dbeta = nn.batchnorm_backward(dy, cache)
            ctx.acc(f"{n}.gamma", dgamma)
            ctx.acc(f"{n}.beta", dbeta)
            return dx

        return y, back

    return batchnorm_layer


def global_avgpool(op: ops.GlobalAvgPool, site: Site, build: None) -> Layer:
    def global_avgpool_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = conv.global_avgpool_forward(x)  # (N, C, H, W) -> (N, C)
        return y, lambda dy: conv.global_avgpool_backward(dy, cache)

    return global_avgpool_layer


def embedding(op: ops.Embedding, site: Site, build: None) -> Layer:
    def embedding_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        y, cache = nn.embedding_forward(x, ctx.params[f"{op.name}.table"])  # (N, T) -> (N, T, E)

        def back(dy: np.ndarray) -> None:
            ctx.acc(f"{op.name}.table", nn.embedding_backward(dy, cache))
            return None  # token ids have no gradient

        return y, back

    return embedding_layer


def gru(op: ops.GRU, site: Site, build: None) -> Layer:
    def gru_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        p = ctx.params
        n = op.name
        y, cache = rnn.gru_forward(
            x,
            p[f"{n}.kernel"],
            p[f"{n}.recurrent_kernel"],
            p[f"{n}.bias_input"],
            p[f"{n}.bias_recurrent"],
        )  # (N, T, E) -> (N, H), last step

        def back(dy: np.ndarray) -> np.ndarray:
            dx, dk, drk, dbi, dbr = rnn.gru_backward(dy, cache)
            for role, g in (
                ("kernel", dk),
                ("recurrent_kernel", drk),
                ("bias_input", dbi),
                ("bias_recurrent", dbr),
            ):
                ctx.acc(f"{n}.{role}", g)
            return dx

        return y, back

    return gru_layer


def sequence(layers: list[Layer], site: Site, build: None) -> Layer:
    """Layers in order; the backward plays their closures in reverse."""

    def sequence_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        tape = []
        for layer in layers:
            x, back = layer(x, ctx)
            tape.append(back)

        def back(dy: np.ndarray) -> np.ndarray | None:
            for b in reversed(tape):
                dy = b(dy)
            return dy

        return x, back

    return sequence_layer


def residual(body: Layer, shortcut: Layer, site: Site, build: None) -> Layer:
    """``body(x) + shortcut(x)``; the output gradient flows into both branches."""

    def residual_layer(x: np.ndarray, ctx: Ctx) -> tuple[np.ndarray, Backward]:
        main, main_back = body(x, ctx)
        side, side_back = shortcut(x, ctx)
        y, cache = nn.add_forward(main, side)

        def back(dy: np.ndarray) -> np.ndarray:
            d_main, d_side = nn.add_backward(dy, cache)
            return main_back(d_main) + side_back(d_side)

        return y, back

    return residual_layer


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch (dropout masks from ``runtime.seed``)."""
    layer = lower_op(TABLE, op, tuple(x.shape[1:]), None)
    ctx = Ctx({}, training=training, rng=np.random.default_rng(runtime.seed))
    y, _ = layer(as_input(x, runtime.dtype), ctx)
    return y
