"""The Rosetta of Keras: one function per spec op, building the native Keras layer(s).

``LOWERINGS`` maps each op class of ``rosetta.spec.ops`` to ``lower(op, x, in_shape, ctx) -> y``:
it creates the Keras layer(s), applies them to ``x`` (a symbolic ``KerasTensor`` while a
``keras.Model`` is built, an eager tensor in ``run_op``) and registers the layer's weights under
their canonical names (``ctx.bind``). ``in_shape`` is the op's input in the *canonical* per-sample
layout ``(C, H, W)``; the tensors themselves are in ``ctx.data_format``.

Padding: the spec's padding is explicit numbers. Where TensorFlow's ``"same"`` would pad exactly
those numbers (stride 1, odd kernel: every 3x3 conv of the CNN) the op uses ``padding="same"``,
one op (the CNN's train step with ZeroPadding2D + "valid" instead took 1.08 [1.01, 1.12] times
as long, interleaved, 12 rounds, load 15). Elsewhere (ResNet's stride-2 convs and its stem, where
"same" would pad bottom/right only) an explicit ``ZeroPadding2D`` precedes a ``"valid"`` conv,
and max-pooling pads with -inf (``NegInfPadding2D``): padded cells are never selected, as the
spec says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import keras
from keras import layers

from rosetta.backends.base import unsupported
from rosetta.backends.tensorflow import convert
from rosetta.backends.tensorflow.convert import Binding
from rosetta.errors import BackendError
from rosetta.spec import ops

NAME = "tensorflow"


@dataclass
class Ctx:
    """What a lowering needs besides its input: dtype, layout, dropout seed, the weight bindings."""

    dtype: str
    data_format: str  # "channels_last" (NHWC) | "channels_first" (NCHW)
    seed: int = 0
    training: bool | None = None  # None: decided at call time (keras.Model); bool: run_op
    bindings: list[Binding] = field(default_factory=list)
    flattened_from: tuple[int, int, int] | None = None  # (C, H, W) of a pending NHWC flatten
    layer_count: int = 0

    def bind(self, names, variables, to_native, to_canonical) -> None:
        self.bindings.append(Binding(tuple(names), tuple(variables), to_native, to_canonical))

    def next_seed(self) -> int:
        self.layer_count += 1
        return self.seed * 1000 + self.layer_count


class NegInfPadding2D(layers.Layer):
    """Pads H and W with -inf: max-pooling's explicit padding (a padded cell is never the max)."""

    def __init__(self, padding: tuple[int, int, int, int], data_format: str, **kwargs):
        super().__init__(**kwargs)
        self.padding = tuple(padding)
        self.data_format = data_format

    def call(self, x):
        t, b, left, right = self.padding
        hw = [[t, b], [left, right]]
        widths = (
            [[0, 0], *hw, [0, 0]] if self.data_format == "channels_last" else [[0, 0], [0, 0], *hw]
        )
        return keras.ops.pad(x, widths, constant_values=float("-inf"))

    def get_config(self) -> dict:
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


class InferenceBatchNorm(layers.BatchNormalization):
    """``BatchNormalization`` that always normalises with its moving statistics (the spec's
    inference-mode BatchNorm), whatever ``training`` flag the model is called with."""

    def call(self, inputs, training=None, mask=None):
        return super().call(inputs, training=False, mask=mask)


def same_is_exact(kernel, stride, padding, in_hw) -> bool:
    """Whether TensorFlow's ``padding="same"`` pads exactly ``padding`` (t, b, l, r)."""
    pads = []
    for k, s, n in zip(kernel, stride, in_hw, strict=True):
        out = -(-n // s)  # ceil(n / s)
        total = max((out - 1) * s + k - n, 0)
        pads += [total // 2, total - total // 2]  # TensorFlow puts the odd cell at the end
    return tuple(pads) == tuple(padding)


def _spatial_padding(op, in_shape, ctx: Ctx, x, pad_layer) -> tuple[object, str]:
    """``(x, keras_padding)``: "valid", "same" where exact, else an explicit padding layer."""
    if not any(op.padding):
        return x, "valid"
    if same_is_exact(op.kernel, op.stride, op.padding, in_shape[1:]):
        return x, "same"
    return pad_layer(op.padding)(x), "valid"


# -- the table's functions -------------------------------------------------------------------
def _conv2d(op: ops.Conv2D, x, in_shape, ctx: Ctx):
    def zero_pad(p):
        t, b, left, right = p
        return layers.ZeroPadding2D(
            ((t, b), (left, right)), data_format=ctx.data_format, dtype=ctx.dtype
        )

    x, padding = _spatial_padding(op, in_shape, ctx, x, zero_pad)
    layer = layers.Conv2D(
        op.out_channels,
        op.kernel,
        strides=op.stride,
        padding=padding,
        data_format=ctx.data_format,
        use_bias=op.bias,
        dtype=ctx.dtype,
        name=op.name,
    )
    y = layer(x)
    names = [f"{op.name}.kernel"] + ([f"{op.name}.bias"] if op.bias else [])
    variables = [layer.kernel] + ([layer.bias] if op.bias else [])
    ctx.bind(names, variables, convert.oihw_to_hwio, convert.hwio_to_oihw)
    return y


def _maxpool2d(op: ops.MaxPool2D, x, in_shape, ctx: Ctx):
    def neg_inf_pad(p):
        return NegInfPadding2D(p, ctx.data_format, dtype=ctx.dtype)

    x, padding = _spatial_padding(op, in_shape, ctx, x, neg_inf_pad)
    pool = layers.MaxPooling2D(
        op.kernel, strides=op.stride, padding=padding, data_format=ctx.data_format, dtype=ctx.dtype
    )
    return pool(x)


def _relu(op: ops.ReLU, x, in_shape, ctx: Ctx):
    return layers.ReLU(dtype=ctx.dtype)(x)


def _dropout(op: ops.Dropout, x, in_shape, ctx: Ctx):
    layer = layers.Dropout(op.rate, seed=ctx.next_seed(), dtype=ctx.dtype)
    return layer(x) if ctx.training is None else layer(x, training=ctx.training)


def _flatten(op: ops.Flatten, x, in_shape, ctx: Ctx):
    if op.order != "CHW":
        raise BackendError(f"backend {NAME!r}: flatten order {op.order!r} is not the spec's CHW")
    if ctx.data_format == "channels_last" and len(in_shape) == 3:
        ctx.flattened_from = tuple(in_shape)  # the next dense layer's rows are permuted
    return layers.Flatten(dtype=ctx.dtype)(x)  # channels_first: already C, H, W order


def _dense(op: ops.Dense, x, in_shape, ctx: Ctx):
    layer = layers.Dense(op.units, use_bias=op.bias, dtype=ctx.dtype, name=op.name)
    y = layer(x)
    names = [f"{op.name}.kernel"] + ([f"{op.name}.bias"] if op.bias else [])
    variables = [layer.kernel] + ([layer.bias] if op.bias else [])
    if ctx.flattened_from is not None:
        chw, ctx.flattened_from = ctx.flattened_from, None
        ctx.bind(names, variables, convert.chw_rows_to_hwc(chw), convert.hwc_rows_to_chw(chw))
    else:
        ctx.bind(names, variables, convert.identity, convert.identity)
    return y


def _batchnorm(op: ops.BatchNorm, x, in_shape, ctx: Ctx):
    if ctx.flattened_from is not None:
        raise BackendError(f"backend {NAME!r}: batchnorm after an NHWC flatten is not lowered")
    axis = -1 if ctx.data_format == "channels_last" or len(in_shape) == 1 else 1
    layer = InferenceBatchNorm(
        axis=axis, epsilon=op.eps, momentum=1.0 - op.momentum, dtype=ctx.dtype, name=op.name
    )
    y = layer(x)
    names = [f"{op.name}.{r}" for r in ("gamma", "beta", "mean", "var")]
    variables = [layer.gamma, layer.beta, layer.moving_mean, layer.moving_variance]
    ctx.bind(names, variables, convert.identity, convert.identity)
    return y


def _global_avgpool(op: ops.GlobalAvgPool, x, in_shape, ctx: Ctx):
    return layers.GlobalAveragePooling2D(data_format=ctx.data_format, dtype=ctx.dtype)(x)


def _embedding(op: ops.Embedding, x, in_shape, ctx: Ctx):
    layer = layers.Embedding(op.vocab, op.dim, dtype=ctx.dtype, name=op.name)
    y = layer(x)
    ctx.bind([f"{op.name}.table"], [layer.embeddings], convert.identity, convert.identity)
    return y


def _gru(op: ops.GRU, x, in_shape, ctx: Ctx):
    if (op.gate_order, op.reset_after) != (("z", "r", "h"), True):
        raise BackendError(f"backend {NAME!r}: GRU must be z, r, h with reset_after=True")
    if (op.initial_state, op.output) != ("zeros", "last"):
        raise BackendError(f"backend {NAME!r}: GRU must start at zeros and return the last step")
    # the cuDNN-eligible configuration: tanh, sigmoid, reset_after, bias, no unroll
    layer = layers.GRU(
        op.units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        reset_after=True,
        unroll=False,
        return_sequences=False,
        dtype=ctx.dtype,
        name=op.name,
    )
    y = layer(x)
    cell = layer.cell
    names = [
        f"{op.name}.{r}" for r in ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    ]
    variables = [cell.kernel, cell.recurrent_kernel, cell.bias]
    ctx.bind(names, variables, convert.gru_to_keras, convert.gru_from_keras)
    return y


def _residual(op: ops.Residual, x, in_shape, ctx: Ctx):
    main = lower_nodes(op.body, x, in_shape, ctx)
    side = lower_nodes(op.shortcut, x, in_shape, ctx) if op.shortcut else x
    return layers.Add(dtype=ctx.dtype)([main, side])


#: the Rosetta of Keras: spec op -> the function that builds its Keras layer(s)
LOWERINGS: dict[type, Callable] = {
    ops.Conv2D: _conv2d,  # [ZeroPadding2D] + Conv2D (kernel OIHW -> HWIO)
    ops.MaxPool2D: _maxpool2d,  # [NegInfPadding2D] + MaxPooling2D
    ops.ReLU: _relu,  # ReLU
    ops.Dropout: _dropout,  # Dropout (inverted; off when training=False)
    ops.Flatten: _flatten,  # Flatten (NHWC: the next Dense's rows permuted to C, H, W)
    ops.Dense: _dense,  # Dense (kernel IO)
    ops.BatchNorm: _batchnorm,  # BatchNormalization, always with the moving statistics
    ops.GlobalAvgPool: _global_avgpool,  # GlobalAveragePooling2D
    ops.Embedding: _embedding,  # Embedding
    ops.GRU: _gru,  # GRU(reset_after=True): kernel z|r|h as the spec, bias (2, 3H)
    ops.Residual: _residual,  # body + shortcut -> Add
}


def lower_nodes(nodes, x, in_shape, ctx: Ctx):
    """Apply the lowering of each node of ``nodes`` in turn; returns the output tensor."""
    shape = tuple(in_shape)
    for node in nodes:
        lower = LOWERINGS.get(type(node))
        if lower is None:
            raise unsupported(NAME, node)
        x = lower(node, x, shape, ctx)
        shape = node.out_shape(shape)
    return x


def check_lowerable(nodes) -> None:
    """Raise ``unsupported`` for the first op (residuals opened) without a lowering."""
    for node in nodes:
        if type(node) not in LOWERINGS:
            raise unsupported(NAME, node)
        if isinstance(node, ops.Residual):
            check_lowerable(node.body)
            check_lowerable(node.shortcut)


def build_keras_model(workload, dtype: str, data_format: str, seed: int):
    """The workload as a functional ``keras.Model`` and its weight bindings (graph order)."""
    check_lowerable(workload.graph)
    ctx = Ctx(dtype=dtype, data_format=data_format, seed=seed)
    shape = tuple(workload.input.shape)
    if workload.input.dtype == "int32":
        inputs = keras.Input(shape=shape, dtype="int32", name="tokens")  # (T,), batch-major
    else:
        native = shape if data_format == "channels_first" else (*shape[1:], shape[0])
        inputs = keras.Input(shape=native, dtype=dtype, name="images")  # (H, W, C) or (C, H, W)
    outputs = lower_nodes(workload.graph, inputs, shape, ctx)
    return keras.Model(inputs, outputs, name=f"rosetta_{workload.name}"), ctx.bindings
