"""Keras' side of the table, on any engine: the layers the op modules build, and how they compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and ``weights`` side by
side), shared by every Keras backend (``tensorflow``, ``keras_jax``, ``keras_torch``): they speak
only ``keras.layers`` and ``keras.ops``, which Keras 3 runs on each engine. This file holds what
several of them share: the build context :class:`Ctx` (dtype, layout, seeds, the dropout gate,
and the weight bindings each op's ``build`` hands to ``ctx.bind``), the layers Keras lacks
(:class:`NegInfPadding2D`, :class:`InferenceBatchNorm`, :class:`GatedDropout`, the transformer's
:class:`PositionEmbedding`, :class:`SelfAttention` (plain or causal), the decoder's
:class:`TiedDense`, :class:`ExactGELU`, :class:`MaskedMean`), the
padding rule, and how layers compose (``sequence``, ``residual``, the mask of real tokens handed
to the layers that take it). A backend's ``lowering.py`` imports ``sequence`` and ``residual``
(so its ``TABLE = OPS.lowering(globals())`` finds them by name) and adds what is its engine's
own: the tensor ``apply_op`` feeds and the device.

Each op becomes a *layer*, here a function of Keras tensors made of Keras layers (most ops one
layer, some a padding layer and the layer), and registers its weights under their canonical
names (``ctx.bind``; the variables are found once the layer is built). The driver walks the
graph; ``model.py`` applies the result to a ``keras.Input`` and gets a functional
``keras.Model``. ``site.in_shape`` is the op's input in the *canonical* per-sample layout
``(C, H, W)``; the tensors themselves are in ``ctx.data_format``.

Padding: the spec's padding is explicit numbers. Where Keras' ``"same"`` would pad exactly those
numbers (stride 1, odd kernel: every 3x3 conv of the CNN) the op uses ``padding="same"``, one op
(on TensorFlow the CNN's train step with ZeroPadding2D + "valid" instead took 1.08 [1.01, 1.12]
times as long, interleaved, 12 rounds, load 15). Elsewhere (ResNet's stride-2 convs and its stem,
where "same" would pad bottom/right only) an explicit ``ZeroPadding2D`` precedes a ``"valid"``
conv, and max-pooling pads with -inf (``NegInfPadding2D``): padded cells are never selected, as
the spec says (:func:`keras_padding`).

Dropout is Keras' own (same rate, seed generator, mask and scaling) with its output selected by
``ctx.dropout_on``, a boolean variable read *inside* the compiled program: ``Model.set_dropout``
flips it, and the timed program runs on without retracing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import keras
from keras import layers

from rosetta.backends.driver import Site, Wiring
from rosetta.backends.keras_common import weights
from rosetta.backends.keras_common.decoding import Decoding
from rosetta.backends.keras_common.weights import Binding
from rosetta.backends.snippet import attr

Layer = Callable[[Any], Any]  # Keras tensor -> Keras tensor, through Keras layers


@dataclass
class Ctx:
    """What the op modules' ``build`` need besides the op: dtype, layout, seeds, the dropout
    gate, and the weight bindings they make (``ops/<op>.py`` ``weights``, graph order)."""

    dtype: str
    data_format: str  # "channels_last" (NHWC) | "channels_first" (NCHW)
    dropout_on: Any  # a boolean variable, read inside the trace (Model.set_dropout)
    seed: int = 0
    training: bool | None = None  # None: the keras.Model call decides; bool: apply_op
    bindings: list[Binding] = field(default_factory=list)
    flattened_from: tuple[int, int, int] | None = None  # (C, H, W) of a pending NHWC flatten
    layer_count: int = 0
    backend: str = "keras"  # the backend's name, for its errors
    #: layer names as identifiers (``layer1_0_conv1``, as the generated source names them):
    #: Keras on PyTorch registers each variable as a torch parameter, whose name may hold no "."
    identifier_names: bool = False
    #: an engine's own layer for an op, supplied by its backend (op name -> ``build(op, site,
    #: ctx)``; keras_torch: the GRU as PyTorch's fused ``nn.GRU``), or for attention and dropout
    #: the ``SelfAttention`` / ``GatedDropout`` subclass to build (keras_torch: PyTorch's own
    #: kernels); the op module uses it where present (``ops/gru.py``, ``attention.py``,
    #: ``dropout.py``)
    native: dict[str, Any] = field(default_factory=dict)
    #: the ``layers.Embedding`` built for each embedding op, by op name: a ``tied_dense`` reads
    #: its ``tie``'s table (``ops/tied_dense.py``)
    embeddings: dict[str, Any] = field(default_factory=dict)
    #: the generation state a decoder's position embedding and causal attentions share
    #: (``decoding.py``), and the lowered graph as a function of tensors (``model.functional``
    #: sets it: what the ``keras.Model`` applies to its ``keras.Input``), which a generation
    #: step calls on ``(N, t)`` ids, any ``t``
    decoding: Decoding = field(default_factory=Decoding)
    forward: Layer | None = None

    def bind(self, binding: Binding) -> None:
        """Record an op's weight binding (its module's ``weights(op, layer, ctx)``)."""
        self.bindings.append(binding)

    def layer_name(self, name: str) -> str:
        """The Keras layer name of the op named ``name`` (the canonical one on TensorFlow)."""
        return attr(name) if self.identifier_names else name

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


class GatedDropout(layers.Dropout):
    """Keras' ``Dropout`` whose training-mode output is ``where(gate, dropout(x), x)``: the mask
    is drawn either way (the random stream does not depend on the gate), and ``gate`` is a
    boolean variable read inside the compiled program, so switching dropout off changes no trace.
    On TensorFlow the gate is a ``tf.Variable`` (not a Keras weight: Keras tracks only its own
    variables); on JAX and PyTorch it is a non-trainable ``keras.Variable``, which this layer then
    tracks, so a stateless call (JAX) takes its current value as an input like any other state."""

    def __init__(self, rate: float, gate, **kwargs):
        super().__init__(rate, **kwargs)
        # Dropout is built (and its state locked) in its constructor; a keras.Variable gate must
        # still become this layer's state, as Keras' own _untrack_variable unlocks to change it
        locked = self._tracker.locked
        self._tracker.unlock()
        self._gate = gate
        if locked:
            self._tracker.lock()

    def call(self, inputs, training=False):
        dropped = super().call(inputs, training=training)
        if isinstance(self._gate, EagerGate):  # an eager engine: the choice is Python's
            return dropped if self._gate.on else inputs
        gate = keras.ops.convert_to_tensor(
            self._gate
        )  # the value in effect (a stateless call: its input)
        return keras.ops.where(gate, dropped, inputs) if training else dropped


class EagerGate:
    """The dropout gate of an engine that runs the model eagerly, op by op (Keras on PyTorch,
    ``KerasEngineModel.make_gate``): a Python flag each ``GatedDropout`` reads when called, so a
    training-mode output is the dropout's own tensor or the input, with no select over the
    activations (one pass forward and two backward per dropout layer, ~3% of the transformer's
    eager train step). There is no trace to keep, so nothing is lost; the mask is still drawn
    either way. ``assign`` as a ``keras.Variable``'s."""

    def __init__(self, on: bool = True):
        self.on = bool(on)

    def assign(self, value) -> None:
        self.on = bool(value)


def same_is_exact(kernel, stride, padding, in_hw) -> bool:
    """Whether TensorFlow's ``padding="same"`` pads exactly ``padding`` (t, b, l, r)."""
    pads = []
    for k, s, n in zip(kernel, stride, in_hw, strict=True):
        out = -(-n // s)  # ceil(n / s)
        total = max((out - 1) * s + k - n, 0)
        pads += [total // 2, total - total // 2]  # TensorFlow puts the odd cell at the end
    return tuple(pads) == tuple(padding)


def keras_padding(op, site: Site) -> tuple[tuple[int, int, int, int] | None, str]:
    """``(explicit, padding)`` of a conv or pool: "valid" or exact "same" (explicit None), else
    the spec's ``(t, b, l, r)`` to pad with a layer of its own before a "valid" op."""
    if not any(op.padding):
        return None, "valid"
    if same_is_exact(op.kernel, op.stride, op.padding, site.in_shape[1:]):
        return None, "same"
    return tuple(op.padding), "valid"


def after(pad: layers.Layer, layer: layers.Layer) -> Layer:
    """``layer`` preceded by the explicit padding layer ``pad``."""
    return lambda x: layer(pad(x))


# -- the transformer's layers (keras.ops only: the same layers on TensorFlow, JAX and PyTorch) -----
#: what a transformer model's manifest says of its attention
ATTENTION_NOTE = (
    "Dense projections (the key's without bias) + keras.ops.softmax over the scaled scores, "
    "padding keys at -inf, a row without a real key zeroed (SelfAttention, a Keras layer of "
    "keras.ops); Keras' MultiHeadAttention has a key bias the spec has not, and adds -1e9 to "
    "masked scores: a row of padding only then gets the softmax of its own scores in float64 "
    "(float32 drowns them: uniform weights), neither the spec's 0"
)

#: what a decoder model's manifest says of its causal attention (on TensorFlow and JAX; the
#: keras_torch manifest's ``fused_attention`` says whether its fused core replaced it)
CAUSAL_ATTENTION_NOTE = (
    "SelfAttention(causal=True): the same projections, query i reading keys j <= i under a "
    "lower-triangular mask, keras.ops matmul, where, softmax, matmul (exact at float32 and "
    "float64); not keras.ops.dot_product_attention(is_causal=True): on JAX it is "
    "jax.nn.dot_product_attention, whose softmax runs in float32 (a float64 model would fail its "
    "gate), and on the CPU XLA composes the same ops (the jax backend measured composed at least "
    "as fast, benchmarks/fastpath_transformer); on TensorFlow Keras composes it from the same ops"
)


class PositionEmbedding(layers.Layer):
    """Learned positions: ``x + table[:T]`` on (N, T, E); generating (``decoding`` active),
    the T rows from the positions already seen, ``table[offset : offset + T]``."""

    def __init__(self, max_len: int, dim: int, decoding: Decoding | None = None, **kwargs):
        super().__init__(**kwargs)
        self.max_len, self.dim = max_len, dim
        self.decoding = decoding

    def build(self, input_shape) -> None:
        self.table = self.add_weight(
            shape=(self.max_len, self.dim), initializer="zeros", name="table"
        )

    def call(self, x):
        t, d = keras.ops.shape(x)[1], self.decoding
        if d is not None and d.active:  # (t, E) rows from the offset (a traced int, or an int)
            table = keras.ops.convert_to_tensor(self.table)  # the value (JAX: no variable)
            return x + keras.ops.slice(table, (d.offset, d.offset * 0), (t, self.dim))
        return x + self.table[:t]

    def get_config(self) -> dict:
        return {**super().get_config(), "max_len": self.max_len, "dim": self.dim}


class SelfAttention(layers.Layer):
    """Multi-head self-attention over (N, T, E), in ``keras.ops``: four ``Dense`` projections
    (the key's without bias, as the spec), the scores ``q k^T / sqrt(d)`` with the keys a query
    may not read at ``-inf`` (weight exactly 0, the reference's ``masked_softmax``), and
    ``keras.ops.softmax`` (stable: the engine's own, max subtracted). Keras'
    ``MultiHeadAttention`` is not used: see ``ATTENTION_NOTE``.

    Two masks, one layer: with the key padding mask ``valid`` (N, T) (the spec's ``attention``)
    a query reads the real keys, and a row without any real key has its keys all let in (a
    finite softmax, so no NaN reaches the gradient) and its output set to 0, which also stops
    its gradient; with ``causal`` (the spec's ``causal_attention``, called without ``valid``)
    query ``i`` reads the keys ``j <= i`` (:meth:`attend_causal`). Causal and generating
    (``decoding`` active: ``decoding.py``), the new positions' keys and values are written into
    the static cache at the offset and each query reads the slots up to its own position
    (:meth:`attend_cached`): the positions before are never recomputed."""

    def __init__(
        self,
        dim: int,
        heads: int,
        causal: bool = False,
        decoding: Decoding | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.dim, self.heads, self.causal = dim, heads, causal
        self.decoding = decoding
        policy = self.dtype_policy
        self.query = layers.Dense(dim, dtype=policy, name="query")
        self.key = layers.Dense(dim, use_bias=False, dtype=policy, name="key")
        self.value = layers.Dense(dim, dtype=policy, name="value")
        self.out_proj = layers.Dense(dim, dtype=policy, name="out_proj")

    def build(self, input_shape) -> None:
        for projection in (self.query, self.key, self.value, self.out_proj):
            projection.build(input_shape)  # (N, T, E) -> (N, T, E)

    def call(self, x, valid=None):
        t, d = keras.ops.shape(x)[1], self.dim // self.heads

        def heads(y):  # (N, T, E) -> (N, T, H, d): head h is columns h*d .. (h+1)*d
            return keras.ops.reshape(y, (-1, t, self.heads, d))

        def split(y):  # (N, T, E) -> (N, H, T, d)
            return keras.ops.transpose(heads(y), (0, 2, 1, 3))

        q = split(self.query(x))
        if self.causal and self.decoding is not None and self.decoding.active:
            o = self.attend_cached(q, heads(self.key(x)), heads(self.value(x)))  # (N, H, T, d)
        elif self.causal:
            k, v = split(self.key(x)), split(self.value(x))
            o = self.attend_causal(q, k, v)  # (N, H, T, d)
        else:
            k, v = split(self.key(x)), split(self.value(x))
            any_key = keras.ops.any(valid, axis=1)[:, None, None, None]  # (N, 1, 1, 1)
            keys = keras.ops.logical_or(valid[:, None, None, :], keras.ops.logical_not(any_key))
            o = keras.ops.where(any_key, self.attend(q, k, v, keys), 0.0)  # (N, H, T, d)
        o = keras.ops.reshape(keras.ops.transpose(o, (0, 2, 1, 3)), (-1, t, self.dim))
        return self.out_proj(o)  # heads concatenated in order

    def attend(self, q, k, v, keys):
        """``softmax(q k^T / sqrt(d)) v`` over the keys ``keys`` (broadcast to (N, H, T, T))
        lets in, every row with at least one: (N, H, T, d). An engine may run its own fused
        kernel here (``Ctx.native["attention"]``: keras_torch's
        ``scaled_dot_product_attention``)."""
        d = self.dim // self.heads
        scores = keras.ops.matmul(q, keras.ops.swapaxes(k, -1, -2)) / d**0.5  # (N, H, T, T)
        probs = keras.ops.softmax(keras.ops.where(keys, scores, float("-inf")), axis=-1)
        return keras.ops.matmul(probs, v)

    def attend_causal(self, q, k, v):
        """:meth:`attend` with query ``i`` reading the keys ``j <= i``: the composed form under
        a lower-triangular (1, 1, T, T) mask, exact at every precision. An engine's fused core
        may override it with its causal kernel (keras_torch: ``is_causal=True``)."""
        i = keras.ops.arange(keras.ops.shape(q)[2])
        return self.attend(q, k, v, (i[:, None] >= i[None, :])[None, None])  # key j <= query i

    def attend_cached(self, q, k, v):
        """Generating: the new positions' keys and values ``k``, ``v`` (N, t, H, d) join this
        layer's cache (N, capacity, H, d) at the offset, and the queries ``q`` (N, H, t, d) read
        it, slot ``j`` by query ``i`` where ``j <= offset + i`` (:meth:`attend`, so an engine's
        fused core serves here too, under the mask): (N, H, t, d)."""
        ck, cv = self.decoding.write(self.name, k, v)  # (N, capacity, H, d) each
        ck, cv = keras.ops.transpose(ck, (0, 2, 1, 3)), keras.ops.transpose(cv, (0, 2, 1, 3))
        return self.attend(q, ck, cv, self.decoding.readable(keras.ops.shape(q)[2])[None, None])

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "heads": self.heads, "causal": self.causal}


class TiedDense(layers.Layer):
    """Weight tying (the spec's ``tied_dense``): ``x @ table^T`` over the last axis, (..., E) ->
    (..., V), no bias, where ``table`` is the tied ``layers.Embedding``'s own ``embeddings``
    variable, read at each call. The layer owns no variable: it holds the embedding layer,
    which Keras tracks as its sublayer, and Keras lists a layer's weights without duplicates, so
    the model's ``trainable_variables`` hold the table once (one optimiser slot, one update),
    and the engine's autodiff sums both uses' gradients into it."""

    def __init__(self, embedding: layers.Embedding, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding

    def call(self, x):
        table = keras.ops.cast(self.embedding.embeddings, self.compute_dtype)  # (V, E)
        return keras.ops.matmul(x, keras.ops.transpose(table))  # (..., E) @ (E, V)


class ExactGELU(layers.Layer):
    """``0.5 x (1 + erf(x / sqrt 2))``, ``sqrt 2`` a Python float (converted straight to the
    input's dtype). Keras' own ``gelu(approximate=False)`` is ``tf.nn.gelu`` on TensorFlow, whose
    ``sqrt 2`` is cast from a float32 tensor (5e-9 off in float64, 150x the float64 gate's
    bound); on JAX and PyTorch it is the engine's exact kernel, which ``ops/gelu.py`` uses there."""

    def call(self, x):
        return 0.5 * x * (1.0 + keras.ops.erf(x / 2.0**0.5))


class MaskedMean(layers.Layer):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only (its count is
    taken as 1, so 0 / 1, never 0 / 0)."""

    def call(self, x, valid):
        w = keras.ops.cast(valid, self.compute_dtype)  # (N, T)
        total = keras.ops.einsum("nte,nt->ne", x, w)
        return total / keras.ops.maximum(keras.ops.sum(w, axis=1, keepdims=True), 1.0)


def takes_mask(layer) -> Layer:
    """Mark ``layer`` (a function of ``(x, valid)``) for the sequences that hand it the mask."""
    layer.takes_mask = True
    return layer


def _run(layer, x, valid):
    return layer(x, valid) if getattr(layer, "takes_mask", False) else layer(x)


def sequence(chain: list[Layer], site: Site, ctx: Ctx) -> Layer:
    """The layers applied in order (an empty chain is the identity: a plain shortcut); with
    masked ops, the model's own sequence over token ids makes the mask (id 0 is padding) and
    hands it to every layer and branch that takes it."""
    if not any(getattr(layer, "takes_mask", False) for layer in chain):

        def sequence_layer(x):
            for layer in chain:
                x = layer(x)
            return x

        return sequence_layer
    if site.path == "" and len(site.in_shape) == 1:

        def token_sequence(x):
            valid = keras.ops.not_equal(x, 0)  # (N, T): real tokens
            for layer in chain:
                x = _run(layer, x, valid)
            return x

        return token_sequence

    def masked_sequence(x, valid):
        for layer in chain:
            x = _run(layer, x, valid)
        return x

    return takes_mask(masked_sequence)


def residual(body: Layer, shortcut: Layer, site: Site, ctx: Ctx) -> Layer:
    """``body(x) + shortcut(x)`` through a Keras ``Add`` (the mask handed to a branch that
    takes it)."""
    add = layers.Add(dtype=ctx.dtype)
    if getattr(body, "takes_mask", False) or getattr(shortcut, "takes_mask", False):
        return takes_mask(lambda x, valid: add([_run(body, x, valid), _run(shortcut, x, valid)]))
    return lambda x: add([body(x), shortcut(x)])


def graph(nodes: list[Layer], wiring: Wiring, site: Site, ctx: Ctx) -> Layer:
    """Layers wired by index (the functional API's own form): layer ``j`` on the outputs of the
    layers ``wiring.inputs[j]`` (-1: the graph's input; a variadic layer, ``Add``,
    ``Concatenate``, ``Multiply``, gets their list), the last one's output the graph's; the mask
    handed to the layers that take it."""
    inputs = wiring.inputs

    def run(x, valid=None):
        values = {-1: x}
        for j, (layer, src) in enumerate(zip(nodes, inputs, strict=True)):
            args = [values[k] for k in src]
            arg = args if len(src) > 1 else args[0]
            values[j] = _run(layer, arg, valid)
        return values[len(nodes) - 1]

    if any(getattr(layer, "takes_mask", False) for layer in nodes):
        return takes_mask(run)
    return lambda x: run(x)


def apply_keras_op(
    table, op: object, x, dtype: str, data_format: str, seed: int, training: bool, backend: str
):
    """One parameter-free op on a canonical NumPy batch through ``table``, in ``data_format``,
    on the engine of this process's Keras (the caller enters its device and precision scope):
    canonical NumPy out. Dropout's gate is on, its seed from ``seed``."""
    import numpy as np

    from rosetta.backends.driver import lower_op

    x = np.asarray(x, dtype=dtype)
    gate = keras.Variable(True, trainable=False, dtype="bool", name="dropout_on")
    ctx = Ctx(dtype, data_format, gate, seed=seed, training=training, backend=backend)
    layer = lower_op(table, op, tuple(x.shape[1:]), ctx)  # in_shape: canonical (C, H, W)
    y = layer(keras.ops.convert_to_tensor(weights.images_to_layout(x, data_format)))
    y = np.asarray(keras.ops.convert_to_numpy(y))
    if ctx.flattened_from is not None:
        return weights.flat_hwc_to_chw(y, ctx.flattened_from)
    return weights.images_to_canonical(y, data_format)
