"""The Rosetta of Keras, in text: each op of the spec as the Keras functional-API line that says it.

Keras' functional API reads the same on every engine (TensorFlow, JAX, PyTorch), so this table is
shared: each Keras backend's ``source.py`` is ``OPS = op_table(NAME)`` and
``RENDER = OPS.rendering()``, and its ``lowering.py`` defines the build functions the entries
name (``rosetta/backends/keras_common/lowering.py``). The file is channels-last
(NHWC, Keras' default and the layout TensorFlow's CPU kernels want), so three layout
conversions show up here, each at the op where it happens: conv kernels OIHW -> HWIO; a flatten
of NHWC activations yields rows in H, W, C order, so the next dense layer's kernel rows are
permuted from the spec's C, H, W; and the GRU's two biases are Keras' one ``bias`` of shape
(2, 3H) (its gate order z | r | h is the spec's own, with ``reset_after=True``). Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, OpTable, Site
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    Weight,
    add_branches,
    attr,
    fmt_shape,
    nhwc,
    q,
    statements,
)
from rosetta.spec import ops


def _pair(p: tuple[int, int]) -> str:
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def _shape(site_shape: tuple[int, ...]) -> str:
    return fmt_shape(nhwc(site_shape))


def _layer(n: str) -> str:
    return f"model.get_layer({q(n)})"


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    t, b, left, right = op.padding
    kh, kw = op.kernel
    same = op.stride == (1, 1) and (t, b, left, right) == (
        (kh - 1) // 2,
        kh // 2,
        (kw - 1) // 2,
        kw // 2,
    )
    forward = []
    args = [str(op.out_channels), _pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"strides={_pair(op.stride)}")
    if same and (t, b, left, right) != (0, 0, 0, 0):
        args.append('padding="same"')
    elif (t, b, left, right) != (0, 0, 0, 0):
        forward.append(f"{{x}} = layers.ZeroPadding2D((({t}, {b}), ({left}, {right})))({{x}})")
    if not op.bias:
        args.append("use_bias=False")
    args.append(f"name={q(n)}")
    forward.append(f"{{x}} = layers.Conv2D({', '.join(args)})({{x}})  # {_shape(site.out_shape)}")
    weights = [
        Weight(
            f"{op.name}.kernel",
            f"{_layer(n)}.kernel",
            "oihw_to_hwio(a)",
            "hwio_to_oihw(a)",
            note="OIHW -> HWIO",
        )
    ]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"{_layer(n)}.bias"))
    return Snippet(
        forward=tuple(forward),
        weights=tuple(weights),
        helpers=("oihw_to_hwio", "hwio_to_oihw"),
        notes=(f"{op.name}.kernel: OIHW -> HWIO (channels-last)",),
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    t, b, left, right = op.padding
    forward = []
    if any(op.padding):
        pads = f"[[0, 0], [{t}, {b}], [{left}, {right}], [0, 0]]"
        forward.append(
            f'{{x}} = keras.ops.pad({{x}}, {pads}, constant_values=float("-inf"))'
            "  # a padded cell never wins"
        )
    args = [_pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"strides={_pair(op.stride)}")
    forward.append(
        f"{{x}} = layers.MaxPooling2D({', '.join(args)})({{x}})  # {_shape(site.out_shape)}"
    )
    return Snippet(forward=tuple(forward))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = layers.ReLU()({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = layers.Dropout({op.rate})({{x}})",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.pending_flatten = site.in_shape  # the next dense layer permutes its kernel rows
    line = (
        f"{{x}} = layers.Flatten()({{x}})  # {_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, rows in H, W, C order"
    )
    return Snippet(
        forward=(line,),
        notes=(
            "flatten of NHWC activations: H, W, C order; the next dense kernel's rows permuted",
        ),
    )


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    bias = "" if op.bias else ", use_bias=False"
    kernel = Weight(f"{op.name}.kernel", f"{_layer(n)}.kernel", note="IO, as stored")
    helpers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if ctx.pending_flatten is not None:
        chw, ctx.pending_flatten = ctx.pending_flatten, None
        kernel = Weight(
            kernel.canonical,
            kernel.native,
            f"chw_rows_to_hwc(a, {chw})",
            f"hwc_rows_to_chw(a, {chw})",
            note="rows C, H, W -> H, W, C (the flatten permutation)",
        )
        helpers = ("chw_rows_to_hwc", "hwc_rows_to_chw")
        notes = (f"{op.name}.kernel: rows permuted from C, H, W to H, W, C",)
    weights = [kernel]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"{_layer(n)}.bias"))
    line = (
        f"{{x}} = layers.Dense({op.units}{bias}, name={q(n)})({{x}})  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=tuple(weights), helpers=helpers, notes=notes)


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    roles = (
        ("gamma", "gamma"),
        ("beta", "beta"),
        ("mean", "moving_mean"),
        ("var", "moving_variance"),
    )
    momentum = round(1.0 - op.momentum, 12)  # Keras' momentum is 1 - PyTorch's (the spec's)
    line = (
        f"{{x}} = layers.BatchNormalization(epsilon={op.eps}, momentum={momentum}, name={q(n)})"
        "({x})"
    )
    return Snippet(
        forward=(line,),
        weights=tuple(Weight(f"{op.name}.{c}", f"{_layer(n)}.{k}") for c, k in roles),
    )


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = layers.GlobalAveragePooling2D()({{x}})  # {_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = (
        f"{{x}} = layers.Embedding({op.vocab}, {op.dim}, name={q(n)})({{x}})  # ids "
        f"{fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
    )
    return Snippet(
        forward=(line,), weights=(Weight(f"{op.name}.table", f"{_layer(n)}.embeddings"),)
    )


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    cell = f"{_layer(n)}.cell"
    line = (
        f"{{x}} = layers.GRU({op.units}, reset_after=True, name={q(n)})({{x}})"
        f"  # {fmt_shape(site.out_shape)}, the last step"
    )
    return Snippet(
        forward=(line,),
        weights=(
            Weight(f"{op.name}.kernel", f"{cell}.kernel", note="(E, 3H) z|r|h, as the spec"),
            Weight(f"{op.name}.recurrent_kernel", f"{cell}.recurrent_kernel"),
            Weight(f"{op.name}.bias_input", f"{cell}.bias", native_part="0", note="bias[0]"),
            Weight(f"{op.name}.bias_recurrent", f"{cell}.bias", native_part="1", note="bias[1]"),
        ),
        notes=("GRU: the two biases are rows 0 (input) and 1 (recurrent) of Keras' bias (2, 3H)",),
    )


# -- the transformer's ops: Keras' LayerNormalization and gelu, three small layers of keras.ops ----
def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = f"{{x}} = layers.LayerNormalization(epsilon={op.eps}, name={q(n)})({{x}})"
    return Snippet(
        forward=(line,),
        weights=(
            Weight(f"{op.name}.gamma", f"{_layer(n)}.gamma"),
            Weight(f"{op.name}.beta", f"{_layer(n)}.beta"),
        ),
    )


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=('{x} = layers.Activation("gelu")({x})  # exact (erf) GELU',))


def gelu_in_dtype(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    """TensorFlow's: Keras' gelu there is ``tf.nn.gelu``, whose sqrt 2 is rounded to float32."""
    line = "{x} = ExactGELU()({x})  # Keras' gelu on TensorFlow rounds sqrt 2 to float32"
    return Snippet(forward=(line,), helpers=("ExactGELU",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = f"{{x}} = PositionEmbedding({op.max_len}, {site.in_shape[1]}, name={q(n)})({{x}})"
    return Snippet(
        forward=(line,),
        weights=(Weight(f"{op.name}.table", f"{_layer(n)}.table"),),
        helpers=("PositionEmbedding",),
    )


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    ctx.extra["mask"] = True
    line = (
        f"{{x}} = SelfAttention({site.in_shape[1]}, {op.heads}, name={q(n)})({{x}}, valid)"
        f"  # {fmt_shape(site.out_shape)}"
    )
    parts = (
        ("query_kernel", "query.kernel"), ("query_bias", "query.bias"),
        ("key_kernel", "key.kernel"), ("value_kernel", "value.kernel"),
        ("value_bias", "value.bias"), ("output_kernel", "out_proj.kernel"),
        ("output_bias", "out_proj.bias"),
    )  # fmt: skip
    weights = tuple(Weight(f"{op.name}.{r}", f"{_layer(n)}.{v}") for r, v in parts)
    return Snippet(forward=(line,), weights=weights, helpers=("SelfAttention",))


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        f"{{x}} = MaskedMean()({{x}}, valid)  # mean over real tokens: {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("MaskedMean",))


#: the transformer's layers as the generated file writes them (keras.ops: any engine)
TRANSFORMER_LAYERS = {
    "PositionEmbedding": '''
class PositionEmbedding(layers.Layer):
    """Learned positions: x + table[:T]."""

    def __init__(self, max_len, dim, **kwargs):
        super().__init__(**kwargs)
        self.max_len, self.dim = max_len, dim

    def build(self, input_shape):
        self.table = self.add_weight(shape=(self.max_len, self.dim), initializer="zeros")

    def call(self, x):
        return x + self.table[: keras.ops.shape(x)[1]]
''',
    "SelfAttention": '''
class SelfAttention(layers.Layer):
    """Multi-head self-attention; padding keys (valid False) take no part; a row of padding
    only attends to nothing (0). The key projection has no bias (the softmax cancels one), so
    not keras.layers.MultiHeadAttention, which also masks with -1e9 rather than excluding."""

    def __init__(self, dim, heads, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.heads = dim, heads
        self.query = layers.Dense(dim, name="query")
        self.key = layers.Dense(dim, use_bias=False, name="key")
        self.value = layers.Dense(dim, name="value")
        self.out_proj = layers.Dense(dim, name="out_proj")

    def build(self, input_shape):
        for projection in (self.query, self.key, self.value, self.out_proj):
            projection.build(input_shape)

    def call(self, x, valid):
        t, d = keras.ops.shape(x)[1], self.dim // self.heads

        def split(y):  # (N, T, E) -> (N, heads, T, d)
            return keras.ops.transpose(keras.ops.reshape(y, (-1, t, self.heads, d)), (0, 2, 1, 3))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = keras.ops.matmul(q, keras.ops.swapaxes(k, -1, -2)) / d**0.5
        any_key = keras.ops.any(valid, axis=1)[:, None, None, None]
        # padding keys at -inf; a row with no real key lets all in (finite), then outputs 0
        keys = keras.ops.logical_or(valid[:, None, None, :], keras.ops.logical_not(any_key))
        probs = keras.ops.softmax(keras.ops.where(keys, scores, float("-inf")), axis=-1)
        o = keras.ops.where(any_key, keras.ops.matmul(probs, v), 0.0)
        o = keras.ops.reshape(keras.ops.transpose(o, (0, 2, 1, 3)), (-1, t, self.dim))
        return self.out_proj(o)
''',
    "MaskedMean": '''
class MaskedMean(layers.Layer):
    """The mean over real tokens (0 for a row of padding only)."""

    def call(self, x, valid):
        w = keras.ops.cast(valid, self.compute_dtype)
        total = keras.ops.einsum("nte,nt->ne", x, w)
        return total / keras.ops.maximum(keras.ops.sum(w, axis=1, keepdims=True), 1.0)
''',
    "ExactGELU": '''
class ExactGELU(layers.Layer):
    """0.5 x (1 + erf(x / sqrt 2)), sqrt 2 in x's dtype (tf.nn.gelu casts it from float32)."""

    def call(self, x):
        return 0.5 * x * (1.0 + keras.ops.erf(x / 2.0**0.5))
''',
}


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the functional API); the model's own
    sequence over token ids first makes the mask of real tokens its masked layers read (an op
    that reads it sets ``ctx.extra["mask"]``: the transformer's)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = keras.ops.not_equal({x}, 0)  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, ``Add``."""
    join = "{x} = layers.Add()([{x}, {s}])  # " + _shape(site.out_shape)
    return add_branches(body, shortcut, site, join)


def op_table(backend: str) -> OpTable:
    """The one op table of the Keras backend ``backend`` (its build functions, named, are found
    in that backend's ``lowering.py``; the rendering is shared: the Keras source is the same on
    every engine, but for the GELU line on TensorFlow)."""
    return OpTable(
        backend=backend,
        entries={
            # [ZeroPadding2D] + Conv2D (kernel OIHW -> HWIO)
            ops.Conv2D: Entry("conv2d", conv2d),
            # [NegInfPadding2D] + MaxPooling2D
            ops.MaxPool2D: Entry("maxpool2d", maxpool2d),
            # ReLU
            ops.ReLU: Entry("relu", relu),
            # Dropout (inverted), gated by a boolean variable in training mode
            ops.Dropout: Entry("dropout", dropout),
            # Flatten (NHWC: the next Dense's rows permuted to C, H, W)
            ops.Flatten: Entry("flatten", flatten),
            # Dense (kernel IO)
            ops.Dense: Entry("dense", dense),
            # BatchNormalization, always with the moving statistics
            ops.BatchNorm: Entry("batchnorm", batchnorm),
            # GlobalAveragePooling2D
            ops.GlobalAvgPool: Entry("global_avgpool", global_avgpool),
            # Embedding
            ops.Embedding: Entry("embedding", embedding),
            # GRU(reset_after=True): kernel z|r|h as the spec, bias (2, 3H)
            ops.GRU: Entry("gru", gru),
            # LayerNormalization(epsilon=spec's)
            ops.LayerNorm: Entry("layer_norm", layer_norm),
            # exact GELU: Keras' gelu; on TensorFlow the formula with sqrt 2 in the dtype
            ops.GELU: Entry("gelu", gelu_in_dtype if backend == "tensorflow" else gelu),
            # a learned (max_len, E) table added to the first T positions
            ops.PositionEmbedding: Entry("position_embedding", position_embedding),
            # Dense projections + keras.ops.softmax over masked scores
            ops.Attention: Entry("attention", attention),
            # masked sum / max(count, 1)
            ops.MaskedMean: Entry("masked_mean", masked_mean),
        },
        sequence=Entry("sequence", sequence),
        residual=Entry("residual", residual),
        helpers=TRANSFORMER_LAYERS,
    )
