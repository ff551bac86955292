"""The Rosetta of Chainer, in text: each op of the spec as the ``chainer.links``/``functions``
source that says it.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``. Chainer is NCHW throughout, so
OIHW kernels and the C, H, W flatten pass unchanged; ``L.Linear.W`` is (out, in), the canonical
IO kernel transposed; ``L.NStepGRU`` holds six weight matrices and six biases, ``w0..w2`` for the
input gates r, z, h and ``w3..w5`` for the recurrent ones (reset applied after the recurrent
matmul, the spec's reset_after), so each canonical GRU tensor is split into three column blocks
(the gate order z | r | h becoming r, z, h). Text only.
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
    statements,
)
from rosetta.spec import ops

NAME = "chainer"
CHAINER_GATES = {"r": 0, "z": 1, "h": 2}  # NStepGRU's index of each gate (chainer n_step_gru)


def _pair(p: tuple[int, int]) -> str:
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def _sym(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    t, b, left, right = padding
    return (t, left) if t == b and left == right else None


def _explicit_pad(padding: tuple[int, int, int, int], value: str) -> str:
    t, b, left, right = padding
    return (
        f'{{x}} = F.pad({{x}}, ((0, 0), (0, 0), ({t}, {b}), ({left}, {right})), "constant", '
        f"constant_values={value})  # asymmetric padding"
    )


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    pad = _sym(op.padding)
    args = [str(site.in_shape[0]), str(op.out_channels), f"ksize={_pair(op.kernel)}"]
    if op.stride != (1, 1):
        args.append(f"stride={_pair(op.stride)}")
    if pad and pad != (0, 0):
        args.append(f"pad={_pair(pad)}")
    if not op.bias:
        args.append("nobias=True")
    forward = [] if pad is not None else [_explicit_pad(op.padding, "0")]
    forward.append(f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.W", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.b"))
    return Snippet(
        (f"self.{n} = L.Convolution2D({', '.join(args)})",), tuple(forward), tuple(weights)
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    pad = _sym(op.padding)
    forward = [] if pad is not None else [_explicit_pad(op.padding, '-float("inf")')]
    args = [_pair(op.kernel), f"stride={_pair(op.stride)}"]
    if pad and pad != (0, 0):
        args.append(f"pad={_pair(pad)}")  # padded cells are -inf
    forward.append(
        f"{{x}} = F.max_pooling_2d({{x}}, {', '.join(args)}, cover_all=False)"
        f"  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=tuple(forward))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.relu({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = F.dropout({{x}}, {op.rate})  # off unless config.train",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = F.reshape({{x}}, ({{x}}.shape[0], -1))  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    nobias = "" if op.bias else ", nobias=True"
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.W", "a.T", "a.T", note="IO -> (out, in)")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.b"))
    axes = ", n_batch_axes=2" if len(site.in_shape) == 2 else ""  # (N, T, I): every position
    return Snippet(
        (f"self.{n} = L.Linear({site.in_shape[-1]}, {op.units}{nobias})",),
        (f"{{x}} = self.{n}({{x}}{axes})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
        notes=(f"{op.name}.kernel: IO -> Linear.W (out, in), transposed",),
    )


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    roles = (("gamma", "gamma"), ("beta", "beta"), ("mean", "avg_mean"), ("var", "avg_var"))
    decay = round(1.0 - op.momentum, 12)  # Chainer's decay is 1 - PyTorch's momentum
    return Snippet(
        (f"self.{n} = L.BatchNormalization({site.in_shape[0]}, eps={op.eps}, decay={decay})",),
        (f"{{x}} = self.{n}({{x}})  # running statistics when config.train is False",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{k}") for c, k in roles),
    )


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = F.average({{x}}, axis=(2, 3))  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = L.EmbedID({op.vocab}, {op.dim})",),
        (
            f"{{x}} = self.{n}({{x}})  # ids {fmt_shape(site.in_shape)} -> "
            f"{fmt_shape(site.out_shape)}",
        ),
        (Weight(f"{op.name}.table", f"model.{n}.W"),),
    )


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    h = op.units
    weights = []
    for canonical, offset, kind, transpose in (
        ("kernel", 0, "ws", True),
        ("recurrent_kernel", 3, "ws", True),
        ("bias_input", 0, "bs", False),
        ("bias_recurrent", 3, "bs", False),
    ):
        for pos, gate in enumerate(op.gate_order):  # z, r, h: column blocks of the spec
            i = CHAINER_GATES[gate] + offset
            cols = f"{pos * h}:{(pos + 1) * h}"
            weights.append(
                Weight(
                    f"{op.name}.{canonical}",
                    f"model.{n}.{kind}[0][{i}]",
                    "a.T" if transpose else "a",
                    "a.T" if transpose else "a",
                    canonical_part=f"np.s_[:, {cols}]" if transpose else f"np.s_[{cols}]",
                    note=f"gate {gate} -> {kind[0]}{i}",
                )
            )
    return Snippet(
        (f"self.{n} = L.NStepGRU(1, {site.in_shape[1]}, {h}, 0.0)",),
        (
            f"hy, _ = self.{n}(None, F.separate({{x}}, axis=0))  # N x (T, E); hy: (1, N, H)",
            f"{{x}} = hy[0]  # {fmt_shape(site.out_shape)}, the last step's state",
        ),
        tuple(weights),
        notes=("GRU: z | r | h column blocks split into NStepGRU's w0..w5 (r=0, z=1, h=2)",),
    )


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[-1]
    return Snippet(
        (f"self.{n} = L.LayerNormalization({e}, eps={op.eps})",),
        (f"{{x}} = F.reshape(self.{n}(F.reshape({{x}}, (-1, {e}))), {{x}}.shape)",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.gamma"),
            Weight(f"{op.name}.beta", f"model.{n}.beta"),
        ),
    )


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = 0.5 * {x} * (1 + F.erf({x} / np.sqrt(2.0)))  # exact GELU",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (
            f"self.{n} = chainer.Parameter(chainer.initializers.Zero(), "
            f"({op.max_len}, {site.in_shape[1]}))",
        ),
        (f"{{x}} = {{x}} + F.broadcast_to(self.{n}[: {{x}}.shape[1]], {{x}}.shape)",),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[1]
    ctx.extra["mask"] = True
    roles = (("query", ""), ("key", ", nobias=True"), ("value", ""), ("output", ""))
    weights = []
    for r, nb in roles:
        weights.append(Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.W", "a.T", "a.T"))
        if not nb:
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.b"))
    projections = ", ".join(f"self.{n}_{r}" for r, _ in roles)
    return Snippet(
        tuple(f"self.{n}_{r} = L.Linear({e}, {e}{nb})" for r, nb in roles),
        (f"{{x}} = self_attention({{x}}, valid, {projections}, heads={op.heads})",),
        tuple(weights),
        helpers=("self_attention",),
    )


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        "{x} = F.sum({x} * (valid / np.maximum(valid.sum(1, keepdims=True), 1))"
        "[:, :, None].astype({x}.dtype), axis=1)  # mean over real tokens"
    )
    return Snippet(forward=(line,))


SELF_ATTENTION = '''
def self_attention(x, valid, query, key, value, output, heads):
    """Multi-head self-attention; padding keys take no part; a row of padding only gives 0."""
    n, t, e = x.shape
    d = e // heads

    def split(y):
        y = F.transpose(F.reshape(y, (n, t, heads, d)), (0, 2, 1, 3))  # (N, heads, T, d)
        return F.reshape(y, (n * heads, t, d))

    q, k, v = (split(p(x, n_batch_axes=2)) for p in (query, key, value))
    scores = F.matmul(q, k, transb=True) * (1 / np.sqrt(d))
    keys = np.broadcast_to(np.repeat(valid, heads, axis=0)[:, None, :], scores.shape)
    scores = F.where(keys, scores, np.full(scores.shape, np.finfo(x.dtype).min, x.dtype))
    o = F.matmul(F.softmax(scores, axis=2), v)
    o = o * np.repeat(valid.any(axis=1), heads)[:, None, None].astype(x.dtype)
    o = F.reshape(F.transpose(F.reshape(o, (n, heads, t, d)), (0, 2, 1, 3)), (n, t, e))
    return output(o, n_batch_axes=2)
'''


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the model's own sequence over token
    ids first makes the mask of real tokens its masked ops read)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = {x} != 0  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + fmt_shape(site.out_shape))


#: the backend's one op table: each op's build function (named: lowering.py) and its source
#: rendering (here); ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = OpTable(
    backend=NAME,
    entries={
        ops.Conv2D: Entry("conv2d", conv2d),
        ops.MaxPool2D: Entry("maxpool2d", maxpool2d),
        ops.ReLU: Entry("relu", relu),
        ops.Dropout: Entry("dropout", dropout),
        ops.Flatten: Entry("flatten", flatten),
        ops.Dense: Entry("dense", dense),
        ops.BatchNorm: Entry("batchnorm", batchnorm),
        ops.GlobalAvgPool: Entry("global_avgpool", global_avgpool),
        ops.Embedding: Entry("embedding", embedding),
        ops.GRU: Entry("gru", gru),
        ops.LayerNorm: Entry("layer_norm", layer_norm),
        ops.GELU: Entry("gelu", gelu),
        ops.PositionEmbedding: Entry("position_embedding", position_embedding),
        ops.Attention: Entry("attention", attention),
        ops.MaskedMean: Entry("masked_mean", masked_mean),
    },
    sequence=Entry("sequence", sequence),
    residual=Entry("residual", residual),
    helpers={"self_attention": SELF_ATTENTION},
)
RENDER = OPS.rendering()
