"""The Rosetta of PyTorch, in text: each op of the spec as the ``torch.nn`` source that says it.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``; each entry returns a
:class:`rosetta.backends.snippet.Snippet` (the ``__init__`` line with the layer's real name, the
``forward`` line with a shape comment, the weights it owns and their layout conversion).
Activations are NCHW, PyTorch's own, so the canonical OIHW kernels and the C, H, W flatten pass
through unchanged; ``Linear.weight`` is (out, in), the canonical IO kernel transposed, and the
GRU's gate blocks are r | z | n where the spec has z | r | h. Text only: imports no torch.
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

NAME = "torch"


def _pair(p: tuple[int, int]) -> str:
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def _sym(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    t, b, left, right = padding
    return (t, left) if t == b and left == right else None


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    pad = _sym(op.padding)
    args = [str(site.in_shape[0]), str(op.out_channels), _pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"stride={_pair(op.stride)}")
    if pad and pad != (0, 0):
        args.append(f"padding={_pair(pad)}")
    if not op.bias:
        args.append("bias=False")
    forward = []
    if pad is None:
        t, b, left, right = op.padding
        forward.append(f"{{x}} = F.pad({{x}}, ({left}, {right}, {t}, {b}))  # asymmetric padding")
    forward.append(f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet((f"self.{n} = nn.Conv2d({', '.join(args)})",), tuple(forward), tuple(weights))


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    pad = _sym(op.padding)
    args = [_pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"stride={_pair(op.stride)}")
    forward = []
    if pad is None:
        t, b, left, right = op.padding
        forward.append(f'{{x}} = F.pad({{x}}, ({left}, {right}, {t}, {b}), value=float("-inf"))')
    elif pad != (0, 0):
        args.append(f"padding={_pair(pad)}")  # PyTorch pads max-pooling with -inf
    forward.append(f"{{x}} = F.max_pool2d({{x}}, {', '.join(args)})  # {fmt_shape(site.out_shape)}")
    return Snippet(forward=tuple(forward))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.relu({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = F.dropout({{x}}, {op.rate}, self.training)",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = torch.flatten({{x}}, 1)  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    bias = "" if op.bias else ", bias=False"
    weights = [
        Weight(f"{op.name}.kernel", f"model.{n}.weight", "a.T", "a.T", note="IO -> (out, in)")
    ]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = nn.Linear({site.in_shape[-1]}, {op.units}{bias})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
        notes=(f"{op.name}.kernel: IO -> Linear.weight (out, in), transposed",),
    )


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kind = "BatchNorm2d" if len(site.in_shape) == 3 else "BatchNorm1d"
    roles = (
        ("gamma", "weight"),
        ("beta", "bias"),
        ("mean", "running_mean"),
        ("var", "running_var"),
    )
    return Snippet(
        (f"self.{n} = nn.{kind}({site.in_shape[0]}, eps={op.eps}, momentum={op.momentum})",),
        (f"{{x}} = self.{n}({{x}})",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{t}") for c, t in roles),
    )


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    shapes = f"{fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
    line = f"{{x}} = {{x}}.mean(dim=(2, 3))  # {shapes}"
    return Snippet(forward=(line,))


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
    kernel = "swap_rz(a, 1).T"  # (E, 3H) z|r|h -> (3H, E) r|z|n
    back = "swap_rz(a.T, 1)"
    note = "z|r|h -> r|z|n, transposed"
    return Snippet(
        (f"self.{n} = nn.GRU({site.in_shape[1]}, {op.units}, batch_first=True)",),
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
                note="z|r|h -> r|z|n",
            ),
            Weight(
                f"{op.name}.bias_recurrent",
                f"model.{n}.bias_hh_l0",
                "swap_rz(a, 0)",
                "swap_rz(a, 0)",
                note="z|r|h -> r|z|n",
            ),
        ),
        helpers=("swap_rz",),
        notes=("GRU gate order: the spec's z | r | h blocks become PyTorch's r | z | n",),
    )


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.LayerNorm({site.in_shape[-1]}, eps={op.eps})",),
        (f"{{x}} = self.{n}({{x}})",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.weight"),
            Weight(f"{op.name}.beta", f"model.{n}.bias"),
        ),
    )


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.gelu({x})  # exact (erf)",))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.Parameter(torch.zeros({op.max_len}, {site.in_shape[1]}))",),
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
        weights.append(
            Weight(
                f"{op.name}.{r}_kernel",
                f"model.{n}_{r}.weight",
                "a.T",
                "a.T",
                note="IO -> (out, in)",
            )
        )
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    projections = ", ".join(f"self.{n}_{r}" for r in roles)
    return Snippet(
        tuple(
            f"self.{n}_{r} = nn.Linear({e}, {e}{', bias=False' if r == 'key' else ''})"
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
            "{x} = (({x} * valid[..., None]).sum(1) / valid.sum(1, keepdim=True).clamp(min=1))"
            f"  # mean over real tokens: {fmt_shape(site.out_shape)}",
        )
    )


SELF_ATTENTION = '''
def self_attention(x, valid, query, key, value, output, heads):
    """Multi-head self-attention; keys where ``valid`` is False (padding) take no part."""
    n, t, e = x.shape
    q, k, v = (p(x).view(n, t, heads, e // heads).transpose(1, 2) for p in (query, key, value))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=valid[:, None, None, :])
    return output(o.transpose(1, 2).reshape(n, t, e))  # heads concatenated, projected
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
    helpers={"self_attention": SELF_ATTENTION},
)
RENDER = OPS.rendering()
