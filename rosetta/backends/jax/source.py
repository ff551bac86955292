"""The Rosetta of JAX, in text: each op of the spec as a line of a pure ``forward(params, x)``.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``. The file is plain JAX (``lax``
convolutions and windows, ``lax.scan`` for the GRU) over a flat dict of arrays keyed by the
spec's names, trained with ``optax``. Activations are channels-last (NHWC, what XLA's CPU and
GPU convolutions prefer), so conv kernels are HWIO (from the spec's OIHW) and the dense layer
after a flatten takes its kernel rows in H, W, C order (permuted from the spec's C, H, W). The
GRU keeps the spec's own layout (gate blocks z | r | h, two biases). Text only.
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

NAME = "jax"


#: the functions the rendered lines call (``conv2d(x, ...)``...), written into the file beside
#: the layout helpers; a render entry names the ones it needs in ``Snippet.helpers``
HELPERS: dict[str, str] = {
    "conv2d": '''
def conv2d(x, kernel, bias, stride, padding):
    """Cross-correlation of NHWC ``x`` with an HWIO ``kernel``, explicit zero padding."""
    y = lax.conv_general_dilated(x, kernel, stride, padding, dimension_numbers=NHWC)
    return y if bias is None else y + bias
''',
    "max_pool": '''
def max_pool(x, kernel, stride, padding):
    """Max pooling of NHWC ``x``; padded cells are -inf (never selected)."""
    window, strides = (1, *kernel, 1), (1, *stride, 1)
    return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, ((0, 0), *padding, (0, 0)))
''',
    "dropout": '''
def dropout(x, rate, rng, i):
    """Inverted dropout with the i-th key folded from ``rng``; identity when ``rng`` is None."""
    if rng is None or rate == 0:
        return x
    keep = jax.random.bernoulli(jax.random.fold_in(rng, i), 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''',
    "batchnorm": '''
def batchnorm(x, gamma, beta, mean, var, eps):
    """Inference-mode batch normalisation over the last (channel) axis."""
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
''',
    "gru": '''
def gru(x, kernel, recurrent_kernel, bias_input, bias_recurrent):
    """GRU over (N, T, E) from a zero state, gate blocks z | r | h, reset applied after the
    recurrent matmul (reset_after); returns the last step's state (N, H)."""
    h0 = jnp.zeros((x.shape[0], recurrent_kernel.shape[0]), x.dtype)
    xw = x @ kernel + bias_input  # (N, T, 3H): every step's input projection at once

    def step(h, xw_t):
        xz, xr, xh = jnp.split(xw_t, 3, axis=-1)
        hz, hr, hh = jnp.split(h @ recurrent_kernel + bias_recurrent, 3, axis=-1)
        z = jax.nn.sigmoid(xz + hz)
        r = jax.nn.sigmoid(xr + hr)
        n = jnp.tanh(xh + r * hh)
        return z * h + (1 - z) * n, None

    h, _ = lax.scan(step, h0, jnp.swapaxes(xw, 0, 1))  # scan over time: (T, N, 3H)
    return h
''',
    "layer_norm": '''
def layer_norm(x, gamma, beta, eps):
    """LayerNorm over the last axis: biased variance, eps inside the root."""
    mean = x.mean(axis=-1, keepdims=True)
    var = jnp.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * gamma + beta
''',
    "self_attention": '''
def self_attention(x, valid, wq, bq, wk, wv, bv, wo, bo, heads):
    """Multi-head self-attention; keys where ``valid`` is False (padding) take no part; a
    row of padding only attends to nothing (0)."""
    n, t, e = x.shape
    split = (n, t, heads, e // heads)  # (N, T, E) -> (B, T, N, H) as jax.nn wants it
    q, k, v = (x @ wq + bq).reshape(split), (x @ wk).reshape(split), (x @ wv + bv).reshape(split)
    mask = valid[:, None, None, :]  # (N, 1, 1, T): keys that take part
    if x.dtype == jnp.float64:  # jax.nn's softmax runs in float32 whatever the inputs
        s = jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
        p = jax.nn.softmax(jnp.where(mask, s, jnp.finfo(s.dtype).min), axis=-1)
        o = jnp.einsum("bnts,bsnh->btnh", p, v)
    else:
        o = jax.nn.dot_product_attention(q, k, v, mask=mask)  # (N, T, heads, d)
    o = jnp.where(valid.any(axis=1)[:, None, None, None], o, 0)
    return o.reshape(n, t, e) @ wo + bo
''',
}


def _shape(shape: tuple[int, ...]) -> str:
    return fmt_shape(nhwc(shape))


def _p(name: str) -> str:
    return f"p[{q(name)}]"


def _w(name: str, **kw: str) -> Weight:
    return Weight(name, repr(name), **kw)


def _pads(padding: tuple[int, int, int, int]) -> str:
    t, b, left, right = padding
    return f"(({t}, {b}), ({left}, {right}))"


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    bias = _p(f"{op.name}.bias") if op.bias else "None"
    line = (
        f"{{x}} = conv2d({{x}}, {_p(f'{op.name}.kernel')}, {bias}, {op.stride}, "
        f"{_pads(op.padding)})  # {_shape(site.out_shape)}"
    )
    weights = [
        _w(
            f"{op.name}.kernel",
            to_native="oihw_to_hwio(a)",
            to_canonical="hwio_to_oihw(a)",
            note="OIHW -> HWIO",
        )
    ]
    if op.bias:
        weights.append(_w(f"{op.name}.bias"))
    return Snippet(
        forward=(line,),
        weights=tuple(weights),
        helpers=("conv2d", "oihw_to_hwio", "hwio_to_oihw"),
        notes=(f"{op.name}.kernel: OIHW -> HWIO (channels-last)",),
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = max_pool({{x}}, {op.kernel}, {op.stride}, {_pads(op.padding)})"
        f"  # {_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("max_pool",))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = jax.nn.relu({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    i = ctx.extra.get("dropouts", 0)
    ctx.extra["dropouts"] = i + 1
    line = f"{{x}} = dropout({{x}}, {op.rate}, rng, {i})  # rng None: evaluation, identity"
    return Snippet(forward=(line,), helpers=("dropout",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.pending_flatten = site.in_shape
    line = (
        f"{{x}} = {{x}}.reshape({{x}}.shape[0], -1)  # {_shape(site.in_shape)} -> "
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
    line = f"{{x}} = {{x}} @ {_p(f'{op.name}.kernel')}{bias}  # {fmt_shape(site.out_shape)}"
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
        f"{{x}} = {{x}}.mean(axis=(1, 2))  # {_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
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
    line = f"{{x}} = gru({{x}}, {args})  # {fmt_shape(site.out_shape)}, the last step"
    weights = tuple(
        _w(f"{op.name}.{r}", note="z|r|h, as the spec" if i == 0 else "")
        for i, r in enumerate(roles)
    )
    return Snippet(forward=(line,), weights=weights, helpers=("gru",))


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(_p(f"{op.name}.{r}") for r in ("gamma", "beta"))
    line = f"{{x}} = layer_norm({{x}}, {args}, {op.eps})"
    weights = tuple(_w(f"{op.name}.{r}") for r in ("gamma", "beta"))
    return Snippet(forward=(line,), weights=weights, helpers=("layer_norm",))


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = jax.nn.gelu({x}, approximate=False)  # exact (erf)",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = {{x}} + {_p(f'{op.name}.table')}[: {{x}}.shape[1]]  # learned positions"
    return Snippet(forward=(line,), weights=(_w(f"{op.name}.table"),))


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    args = ", ".join(_p(f"{op.name}.{r}") for r in ops.ATTENTION_ROLES)
    line = (
        f"{{x}} = self_attention({{x}}, valid, {args}, heads={op.heads})"
        f"  # {fmt_shape(site.out_shape)}"
    )
    weights = tuple(_w(f"{op.name}.{r}") for r in ops.ATTENTION_ROLES)
    return Snippet(forward=(line,), weights=weights, helpers=("self_attention",))


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        "{x} = jnp.einsum('nte,nt->ne', {x}, valid.astype({x}.dtype)) / jnp.maximum("
        f"valid.sum(axis=1, keepdims=True), 1)  # mean over real tokens: "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the model's own sequence over token
    ids first makes the mask of real tokens that its masked ops read)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = {x} != 0  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + _shape(site.out_shape))


#: the backend's one op table: each op's build function (named: lowering.py) and its source
#: rendering (here); ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = OpTable(
    backend=NAME,
    entries={
        # lax.conv_general_dilated, NHWC x HWIO
        ops.Conv2D: Entry("conv2d", conv2d),
        # lax.reduce_window(max), -inf padding
        ops.MaxPool2D: Entry("maxpool2d", maxpool2d),
        # jnp.where(x > 0, x, 0)
        ops.ReLU: Entry("relu", relu),
        # jax.random.bernoulli, key folded per site, runtime on/off
        ops.Dropout: Entry("dropout", dropout),
        # reshape (dense rows permuted at set_params)
        ops.Flatten: Entry("flatten", flatten),
        # jnp.dot
        ops.Dense: Entry("dense", dense),
        # inference-mode affine
        ops.BatchNorm: Entry("batchnorm", batchnorm),
        # jnp.mean over H, W
        ops.GlobalAvgPool: Entry("global_avgpool", global_avgpool),
        # jnp.take, time-major out
        ops.Embedding: Entry("embedding", embedding),
        # lax.scan over time, reset_after
        ops.GRU: Entry("gru", gru),
        # mean / var over the last axis, rsqrt
        ops.LayerNorm: Entry("layer_norm", layer_norm),
        # jax.nn.gelu(approximate=False)
        ops.GELU: Entry("gelu", gelu),
        ops.PositionEmbedding: Entry("position_embedding", position_embedding),
        # jax.nn.dot_product_attention with a boolean key mask
        ops.Attention: Entry("attention", attention),
        ops.MaskedMean: Entry("masked_mean", masked_mean),
    },
    sequence=Entry("sequence", sequence),
    residual=Entry("residual", residual),
    helpers=HELPERS,
)
RENDER = OPS.rendering()
