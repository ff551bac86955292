"""The Rosetta of Paddle, in text: each op of the spec as the ``paddle.nn`` source that says it.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``; each entry returns a
:class:`rosetta.backends.snippet.Snippet` (the ``__init__`` line with the layer's real name, the
``forward`` line with a shape comment, the weights it owns and their layout conversion).
Activations are NCHW, Paddle's default ``data_format``, so the canonical OIHW kernels and the
C, H, W flatten pass through unchanged; ``nn.Linear.weight`` is ``(in, out)``, the canonical IO
kernel itself (no transpose, unlike PyTorch); ``nn.Conv2D`` and ``F.max_pool2d`` take
asymmetric padding as ``[top, bottom, left, right]``; the GRU's gate blocks are r | z | c where
the spec has z | r | h. Text only: imports no paddle.
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

NAME = "paddle"


def _pair(p: tuple[int, int]) -> str:
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def padding_arg(padding: tuple[int, int, int, int]) -> int | tuple[int, int] | list[int]:
    """The spec's ``(top, bottom, left, right)`` as Paddle's ``padding``: an int or an
    ``(h, w)`` pair where symmetric, else the list ``[top, bottom, left, right]``."""
    t, b, left, right = padding
    if t == b and left == right:
        return t if t == left else (t, left)
    return [t, b, left, right]


def _pad_text(padding: tuple[int, int, int, int]) -> str:
    arg = padding_arg(padding)
    if isinstance(arg, list):
        return str(arg)
    return _pair(arg) if isinstance(arg, tuple) else str(arg)


def bn_momentum(momentum: float) -> float:
    """The spec's BatchNorm momentum (PyTorch's: ``new = (1 - m) old + m batch``) in Paddle's
    convention (``new = m old + (1 - m) batch``)."""
    return round(1.0 - momentum, 12)


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    args = [str(site.in_shape[0]), str(op.out_channels), _pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"stride={_pair(op.stride)}")
    if any(op.padding):
        args.append(f"padding={_pad_text(op.padding)}")
    if not op.bias:
        args.append("bias_attr=False")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = nn.Conv2D({', '.join(args)})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    args = [_pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"stride={_pair(op.stride)}")
    if any(op.padding):
        args.append(f"padding={_pad_text(op.padding)}")  # padded cells are never selected
    return Snippet(
        forward=(f"{{x}} = F.max_pool2d({{x}}, {', '.join(args)})  # {fmt_shape(site.out_shape)}",)
    )


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.relu({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    # a layer, numbered in graph order, so that it can be switched off alone (the generated
    # file's set_mode); nn.Dropout's mode "upscale_in_train" (its default) is inverted dropout
    i = ctx.extra["dropout"] = ctx.extra.get("dropout", 0) + 1
    return Snippet(
        (f"self.dropout{i} = nn.Dropout({op.rate})",), (f"{{x}} = self.dropout{i}({{x}})",)
    )


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = paddle.flatten({{x}}, start_axis=1)  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    bias = "" if op.bias else ", bias_attr=False"
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="(in, out), as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = nn.Linear({site.in_shape[-1]}, {op.units}{bias})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
    )


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kind = "BatchNorm2D" if len(site.in_shape) == 3 else "BatchNorm1D"
    roles = (("gamma", "weight"), ("beta", "bias"), ("mean", "_mean"), ("var", "_variance"))
    m = bn_momentum(op.momentum)
    return Snippet(
        (f"self.{n} = nn.{kind}({site.in_shape[0]}, momentum={m}, epsilon={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{t}") for c, t in roles),
        notes=(f"{op.name}: Paddle's momentum is 1 - the spec's (PyTorch's) {op.momentum}",),
    )


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    shapes = f"{fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
    return Snippet(forward=(f"{{x}} = {{x}}.mean(axis=[2, 3])  # {shapes}",))


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.Embedding({op.vocab}, {op.dim})",),
        (
            f"{{x}} = self.{n}({{x}})  # ids {fmt_shape(site.in_shape)} -> "
            f"{fmt_shape(site.out_shape)}",
        ),
        (Weight(f"{op.name}.table", f"model.{n}.weight"),),
    )


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kernel = "swap_rz(a, 1).T"  # (E, 3H) z|r|h -> (3H, E) r|z|c
    back = "swap_rz(a.T, 1)"
    note = "z|r|h -> r|z|c, transposed"
    return Snippet(
        (f"self.{n} = nn.GRU({site.in_shape[1]}, {op.units})",),
        (
            f"_, {{x}} = self.{n}({{x}})  # h: (1, N, {op.units}), the last step's state",
            f"{{x}} = {{x}}[0]  # {fmt_shape(site.out_shape)}",
        ),
        (
            Weight(f"{op.name}.kernel", f"model.{n}.weight_ih_l0", kernel, back, note=note),
            Weight(
                f"{op.name}.recurrent_kernel", f"model.{n}.weight_hh_l0", kernel, back, note=note
            ),
            Weight(
                f"{op.name}.bias_input",
                f"model.{n}.bias_ih_l0",
                "swap_rz(a, 0)",
                "swap_rz(a, 0)",
                note="z|r|h -> r|z|c",
            ),
            Weight(
                f"{op.name}.bias_recurrent",
                f"model.{n}.bias_hh_l0",
                "swap_rz(a, 0)",
                "swap_rz(a, 0)",
                note="z|r|h -> r|z|c",
            ),
        ),
        helpers=("swap_rz",),
        notes=("GRU gate order: the spec's z | r | h blocks become Paddle's r | z | c",),
    )


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = LayerNorm({site.in_shape[-1]}, epsilon={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.weight"),
            Weight(f"{op.name}.beta", f"model.{n}.bias"),
        ),
        helpers=("LayerNorm",),
    )


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.gelu({x}, approximate=False)  # exact (erf)",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = self.create_parameter([{op.max_len}, {site.in_shape[1]}])",),
        (f"{{x}} = {{x}} + self.{n}[: {{x}}.shape[1]]  # learned positions",),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[1]
    ctx.extra["mask"] = True
    roles = ("query", "key", "value", "output")
    weights = []
    for r in roles:
        weights.append(Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.weight", note="(in, out)"))
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    projections = ", ".join(f"self.{n}_{r}" for r in roles)
    return Snippet(
        tuple(
            f"self.{n}_{r} = nn.Linear({e}, {e}{', bias_attr=False' if r == 'key' else ''})"
            for r in roles
        ),
        (
            f"{{x}} = self_attention({{x}}, valid, {projections}, heads={op.heads})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        tuple(weights),
        helpers=("self_attention",),
    )


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    return Snippet(
        forward=(
            f"{{x}} = masked_mean({{x}}, valid)  # mean over real tokens: "
            f"{fmt_shape(site.out_shape)}",
        ),
        helpers=("masked_mean",),
    )


#: Paddle 3.3's F.scaled_dot_product_attention on the CPU is this composition in Python
#: (``_math_attention``), its boolean mask made additive -inf: a row whose every key is padding
#: would be softmax(-inf, ...) = NaN. Written out here with the spec's rule for that row.
SELF_ATTENTION = '''
def self_attention(x, valid, query, key, value, output, heads):
    """Multi-head self-attention; keys where ``valid`` is False (padding) take no part, and a
    sequence of padding only attends to nothing (its head outputs are 0, not NaN)."""
    n, t, e = x.shape
    q, k, v = (
        p(x).reshape([n, t, heads, e // heads]).transpose([0, 2, 1, 3])
        for p in (query, key, value)
    )  # (N, H, T, d)
    any_key = valid.any(axis=1, keepdim=True)  # (N, 1): False for a sequence of padding only
    keep = (valid | ~any_key)[:, None, None, :]  # (N, 1, 1, T); such a row: every key, then 0
    sqrt_d = paddle.full([], e // heads, x.dtype).sqrt()  # a tensor of x's dtype, not a float
    scores = paddle.matmul(q, k, transpose_y=True) / sqrt_d  # (N, H, T, T)
    weights = F.softmax(paddle.where(keep, scores, paddle.full([], float("-inf"), x.dtype)))
    o = paddle.matmul(weights, v) * any_key.astype(x.dtype)[:, :, None, None]  # (N, H, T, d)
    return output(o.transpose([0, 2, 1, 3]).reshape([n, t, e]))  # heads concatenated
'''

#: nn.LayerNorm's kernel holds epsilon as a float32 attribute (Paddle 3.3.1): the float64 file
#: writes the normalisation out (``lowering.LayerNorm`` says what it measured)
LAYER_NORM = '''
class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm; in float64 written out, because Paddle's layer_norm kernel holds epsilon as
    a float32 attribute (1e-5 would become 9.99999975e-06)."""

    def forward(self, x):
        if x.dtype != paddle.float64:
            return super().forward(x)
        xc = x - x.mean(axis=-1, keepdim=True)
        var = (xc * xc).mean(axis=-1, keepdim=True)
        eps = paddle.full([], self._epsilon, x.dtype)
        return xc / paddle.sqrt(var + eps) * self.weight + self.bias
'''

MASKED_MEAN = '''
def masked_mean(x, valid):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a sequence of padding only."""
    w = valid.astype(x.dtype)  # (N, T)
    return (x * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clip(min=1)
'''


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
    helpers={"self_attention": SELF_ATTENTION, "masked_mean": MASKED_MEAN, "LayerNorm": LAYER_NORM},
)
RENDER = OPS.rendering()
