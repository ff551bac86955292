"""The Rosetta of PyTensor, in text: each op of the spec as a line of a symbolic ``forward``.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``. The file is plain PyTensor:
``forward(p, x, rngs)`` over a dict of ``shared`` variables keyed by the spec's names, the
convolution as its kernel taps and one ``dot`` (PyTensor 3 has no CNN convolution op),
max-pooling as an ``argmax`` over the stacked taps, ``scan`` for the GRU, ``pytensor.grad`` and
the optimiser as the compiled function's ``updates``. Activations are channels-last (NHWC), so
conv kernels are HWIO (from the spec's OIHW) and the dense layer after a flatten takes its
kernel rows in H, W, C order. The GRU keeps the spec's own layout. The Transformer's ops are
helpers over batch-major ``(N, T, E)`` (``layer_norm``, ``gelu`` with ``pt.erf``,
``self_attention`` with ``pt.matmul`` and ``pt.special.softmax`` over the key padding mask,
``masked_mean``), the mask ``valid`` made once from the token ids. Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, OpTable, Site
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    Weight,
    add_branches,
    fmt_shape,
    nhwc,
    q,
    statements,
)
from rosetta.spec import ops

NAME = "pytensor"

#: the functions the rendered lines call, written into the file beside the layout helpers
HELPERS: dict[str, str] = {
    "pad": '''
def pad(x, n, padding, value):
    """NHWC ``x`` (batch size ``n``) with (top, bottom, left, right) cells of ``value`` around
    each image."""
    top, bottom, left, right = padding
    if not any(padding):
        return x
    _, h, w, c = x.type.shape  # static: only the batch size is left open
    full = pt.alloc(pt.constant(np.asarray(value, x.dtype)), n, h + top + bottom,
                    w + left + right, c)
    return pt.set_subtensor(full[:, top : top + h, left : left + w, :], x)
''',
    "taps": '''
def taps(x, kernel, stride, out_hw):
    """The input under each kernel tap (i, j), row-major: KH*KW strided slices (N, Ho, Wo, C)."""
    (ho, wo), (sh, sw) = out_hw, stride
    return [
        x[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw, :]
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]
''',
    "conv2d": '''
def conv2d(x, n, kernel, bias, stride, padding, out_hw):
    """Cross-correlation of NHWC ``x`` (batch size ``n``) with an HWIO ``kernel``: the taps side
    by side on the channel axis and one matrix product (N*Ho*Wo, KH*KW*C) @ (KH*KW*C, O)."""
    kh, kw, c, o = kernel.get_value().shape
    cols = taps(pad(x, n, padding, 0.0), (kh, kw), stride, out_hw)
    cols = cols[0] if len(cols) == 1 else pt.concatenate(cols, axis=3)
    y = pt.dot(cols.reshape((n * out_hw[0] * out_hw[1], kh * kw * c)),
               kernel.reshape((kh * kw * c, o)))
    y = y.reshape((n, out_hw[0], out_hw[1], o))
    return y if bias is None else y + bias
''',
    "max_pool": '''
def max_pool(x, n, kernel, stride, padding, out_hw):
    """Max pooling of NHWC ``x`` (batch size ``n``); padded cells are -inf; the gradient goes to
    the first maximum of each window (argmax), not to every tied cell."""
    window = pt.stack(taps(pad(x, n, padding, -np.inf), kernel, stride, out_hw), axis=-1)
    first = pt.argmax(window, axis=-1, keepdims=True)
    return pt.switch(pt.eq(pt.arange(kernel[0] * kernel[1]), first), window, 0.0).sum(axis=-1)
''',
    "dropout": '''
def dropout(x, rate, rngs):
    """Inverted dropout; ``rngs`` holds the random generator after each draw (the compiled step
    writes the last one back), None in evaluation (the identity)."""
    if rngs is None or rate == 0:
        return x
    next_rng, u = rngs[-1].uniform(0.0, 1.0, size=x.shape, dtype=x.dtype)
    rngs.append(next_rng)
    return pt.switch(u >= rate, x / (1.0 - rate), 0.0)
''',
    "batchnorm": '''
def batchnorm(x, gamma, beta, mean, var, eps):
    """Inference-mode batch normalisation over the last (channel) axis."""
    return (x - mean) / pt.sqrt(var + eps) * gamma + beta
''',
    "gru": '''
def gru(x, kernel, recurrent_kernel, bias_input, bias_recurrent):
    """GRU over (N, T, E) from a zero state, gate blocks z | r | h, reset applied after the
    recurrent matmul (reset_after); returns the last step's state (N, H)."""
    h = recurrent_kernel.get_value().shape[0]
    xw = pt.dot(x.dimshuffle(1, 0, 2), kernel) + bias_input  # (T, N, 3H): every step's input

    def step(xw_t, state):
        hu = pt.dot(state, recurrent_kernel) + bias_recurrent
        z = pt.sigmoid(xw_t[:, :h] + hu[:, :h])
        r = pt.sigmoid(xw_t[:, h : 2 * h] + hu[:, h : 2 * h])
        n = pt.tanh(xw_t[:, 2 * h :] + r * hu[:, 2 * h :])
        return z * state + (1 - z) * n

    h0 = pt.zeros((x.shape[0], h), dtype=x.dtype)
    states = pytensor.scan(step, sequences=[xw], outputs_info=[h0], return_updates=False)
    return states[-1]
''',
    "layer_norm": '''
def layer_norm(x, gamma, beta, eps):
    """Normalisation over the last axis: biased variance (divided by E), eps inside the root."""
    xc = x - x.mean(axis=-1, keepdims=True)
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / pt.sqrt(var + np.asarray(eps, x.dtype)) * gamma + beta
''',
    "gelu": '''
def gelu(x):
    """Exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (not the tanh approximation)."""
    half, root2 = (np.asarray(v, x.dtype) for v in (0.5, np.sqrt(2.0)))
    return half * x * (1 + pt.erf(x / root2))
''',
    "self_attention": '''
#: an attention op's parameters, in the spec's order (the key projection has no bias)
ATTENTION_ROLES = ("query_kernel", "query_bias", "key_kernel", "value_kernel", "value_bias",
                   "output_kernel", "output_bias")


def self_attention(x, valid, p, name, heads):
    """Multi-head self-attention over (N, T, E) with the projections ``p[name + ".<role>"]``;
    ``valid`` (N, T) marks the keys that take part (a padding key gets weight 0); a row of
    padding only attends to nothing (its heads give 0). The key projection has no bias: the
    softmax would cancel it."""
    wq, bq, wk, wv, bv, wo, bo = (p[f"{name}.{role}"] for role in ATTENTION_ROLES)
    n, t, e = x.shape
    d = wq.get_value().shape[1] // heads

    def split(y):  # (N, T, E) -> (N, heads, T, d): head-major column blocks
        return y.reshape((n, t, heads, d)).dimshuffle(0, 2, 1, 3)

    q, k, v = split(pt.dot(x, wq) + bq), split(pt.dot(x, wk)), split(pt.dot(x, wv) + bv)
    scores = pt.matmul(q, k.dimshuffle(0, 1, 3, 2)) / np.asarray(np.sqrt(d), x.dtype)
    # a padding key scores the lowest finite value: exp(score - row max) is exactly 0, and a
    # row of padding only stays finite (softmax subtracts the row maximum: stable)
    lowest = np.asarray(np.finfo(x.dtype).min, x.dtype)
    weights = pt.special.softmax(pt.switch(valid.dimshuffle(0, "x", "x", 1), scores, lowest), -1)
    any_key = valid.any(axis=1).astype(x.dtype).dimshuffle(0, "x", "x", "x")
    o = pt.matmul(weights * any_key, v)  # (N, heads, T, d)
    return pt.dot(o.dimshuffle(0, 2, 1, 3).reshape((n, t, e)), wo) + bo
''',
    "masked_mean": '''
def masked_mean(x, valid):
    """(N, T, E) -> (N, E): the mean over the real tokens; a review of padding only gives 0."""
    w = valid.astype(x.dtype)  # (N, T)
    count = pt.maximum(w.sum(axis=1, keepdims=True), 1)  # no token: divide by 1
    return (x * (w / count).dimshuffle(0, 1, "x")).sum(axis=1)
''',
}


def _p(name: str) -> str:
    return f"p[{q(name)}]"


def _w(name: str, **kw: str) -> Weight:
    return Weight(name, repr(name), **kw)


def _hw(site: Site) -> str:
    return f"({site.out_shape[1]}, {site.out_shape[2]})"


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    bias = _p(f"{op.name}.bias") if op.bias else "None"
    line = (
        f"{{x}} = conv2d({{x}}, n, {_p(f'{op.name}.kernel')}, {bias}, {op.stride}, {op.padding}, "
        f"{_hw(site)})  # {fmt_shape(nhwc(site.out_shape))}"
    )
    weights = [
        _w(
            f"{op.name}.kernel",
            to_native="oihw_to_hwio(a)",
            to_canonical="hwio_to_oihw(a)",
            note="OIHW -> HWIO",
        )  # fmt: skip
    ]
    if op.bias:
        weights.append(_w(f"{op.name}.bias"))
    return Snippet(
        forward=(line,),
        weights=tuple(weights),
        helpers=("pad", "taps", "conv2d", "oihw_to_hwio", "hwio_to_oihw"),
        notes=(f"{op.name}.kernel: OIHW -> HWIO (channels-last)",),
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = max_pool({{x}}, n, {op.kernel}, {op.stride}, {op.padding}, {_hw(site)})"
        f"  # {fmt_shape(nhwc(site.out_shape))}"
    )
    return Snippet(forward=(line,), helpers=("pad", "taps", "max_pool"))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = pt.switch({x} > 0, {x}, 0.0)  # gradient 0 at 0",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = dropout({{x}}, {op.rate}, rngs)  # rngs None: evaluation, identity"
    return Snippet(forward=(line,), helpers=("dropout",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.pending_flatten = site.in_shape
    line = (
        f"{{x}} = {{x}}.reshape(({{x}}.shape[0], -1))  # {fmt_shape(nhwc(site.in_shape))} -> "
        f"{fmt_shape(site.out_shape)}, rows in H, W, C order"
    )
    return Snippet(
        forward=(line,),
        notes=(
            "flatten of NHWC activations: H, W, C order; the next dense kernel's rows permuted",
        ),
    )


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f" + {_p(f'{op.name}.bias')}" if op.bias else ""
    line = f"{{x}} = pt.dot({{x}}, {_p(f'{op.name}.kernel')}){bias}  # {fmt_shape(site.out_shape)}"
    kernel = _w(f"{op.name}.kernel", note="IO, as stored")
    helpers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if ctx.pending_flatten is not None:
        chw, ctx.pending_flatten = ctx.pending_flatten, None
        kernel = _w(
            f"{op.name}.kernel",
            to_native=f"chw_rows_to_hwc(a, {chw})",
            to_canonical=f"hwc_rows_to_chw(a, {chw})",
            note="rows C, H, W -> H, W, C (the flatten permutation)",
        )
        helpers = ("chw_rows_to_hwc", "hwc_rows_to_chw")
        notes = (f"{op.name}.kernel: rows permuted from C, H, W to H, W, C",)
    weights = [kernel] + ([_w(f"{op.name}.bias")] if op.bias else [])
    return Snippet(forward=(line,), weights=tuple(weights), helpers=helpers, notes=notes)


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(_p(f"{op.name}.{r}") for r in ("gamma", "beta", "mean", "var"))
    line = f"{{x}} = batchnorm({{x}}, {args}, {op.eps})"
    weights = tuple(_w(f"{op.name}.{r}") for r in ("gamma", "beta", "mean", "var"))
    return Snippet(forward=(line,), weights=weights, helpers=("batchnorm",))


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = {{x}}.mean(axis=(1, 2))  # {fmt_shape(nhwc(site.in_shape))} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = {_p(f'{op.name}.table')}[{{x}}]  # ids {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=(_w(f"{op.name}.table"),))


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    roles = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    args = ", ".join(_p(f"{op.name}.{r}") for r in roles)
    line = f"{{x}} = gru({{x}}, {args})  # {fmt_shape(site.out_shape)}, the last step (scan)"
    weights = tuple(
        _w(f"{op.name}.{r}", note="z|r|h, as the spec" if i == 0 else "")
        for i, r in enumerate(roles)
    )
    return Snippet(forward=(line,), weights=weights, helpers=("gru",))


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    gamma, beta = _p(f"{op.name}.gamma"), _p(f"{op.name}.beta")
    line = f"{{x}} = layer_norm({{x}}, {gamma}, {beta}, {op.eps})"
    weights = (_w(f"{op.name}.gamma"), _w(f"{op.name}.beta"))
    return Snippet(forward=(line,), weights=weights, helpers=("layer_norm",))


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = gelu({x})  # exact (erf)",), helpers=("gelu",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    t = site.in_shape[0]
    line = (
        f"{{x}} = {{x}} + {_p(f'{op.name}.table')}[:{t}]  # learned positions, "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=(_w(f"{op.name}.table"),))


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = f"{{x}} = self_attention({{x}}, valid, p, {q(op.name)}, heads={op.heads})"
    weights = tuple(_w(f"{op.name}.{r}", note="IO, head-major blocks" if r.endswith("kernel")
                       else "") for r in ops.ATTENTION_ROLES)  # fmt: skip
    return Snippet(forward=(line,), weights=weights, helpers=("self_attention",))


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = f"{{x}} = masked_mean({{x}}, valid)  # {fmt_shape(site.out_shape)}, real tokens only"
    return Snippet(forward=(line,), helpers=("masked_mean",))


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the model's own sequence over token
    ids first makes the mask of real tokens its masked ops read)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = pt.neq({x}, 0)  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    out = fmt_shape(nhwc(site.out_shape))
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + out)


#: the backend's one op table: each op's build function (named: lowering.py) and its source
#: rendering (here); ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = OpTable(
    backend=NAME,
    entries={
        # KH*KW strided taps, concatenated, one dot with the (KH*KW*C, O) kernel
        ops.Conv2D: Entry("conv2d", conv2d),
        # argmax over the stacked taps, -inf padding
        ops.MaxPool2D: Entry("maxpool2d", maxpool2d),
        # switch(x > 0, x, 0)
        ops.ReLU: Entry("relu", relu),
        # RandomStream uniform, a shared on/off switch the step reads
        ops.Dropout: Entry("dropout", dropout),
        # reshape (dense rows permuted at set_params)
        ops.Flatten: Entry("flatten", flatten),
        # pt.dot
        ops.Dense: Entry("dense", dense),
        # inference-mode affine
        ops.BatchNorm: Entry("batchnorm", batchnorm),
        # mean over H, W
        ops.GlobalAvgPool: Entry("global_avgpool", global_avgpool),
        # advanced indexing, time-major out
        ops.Embedding: Entry("embedding", embedding),
        # scan over time, reset_after
        ops.GRU: Entry("gru", gru),
        # composed: mean, biased variance, eps inside the root
        ops.LayerNorm: Entry("layer_norm", layer_norm),
        # pt.erf (exact)
        ops.GELU: Entry("gelu", gelu),
        # the table's first T rows added
        ops.PositionEmbedding: Entry("position_embedding", position_embedding),
        # batched matmul (BatchedDot), stable pt.special.softmax, key padding mask via switch
        ops.Attention: Entry("attention", attention),
        # sum weighted by valid / max(count, 1)
        ops.MaskedMean: Entry("masked_mean", masked_mean),
    },
    sequence=Entry("sequence", sequence),
    residual=Entry("residual", residual),
    helpers=HELPERS,
)
RENDER = OPS.rendering()
