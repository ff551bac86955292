"""The Rosetta of NumPy, in text: each op of the spec as a layer of the plain-NumPy file.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``. The generated NumPy file is
built like the reference itself: each op becomes a layer ``layer(x, ctx) -> (y, back)`` (made by
a small factory of the file, ``conv2d("conv1", ...)``, running the reference's own kernels), a
sequence plays the layers' backward closures in reverse, a residual block sends the gradient
down both branches. Canonical layouts throughout: no weight changes layout. Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, OpTable, Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, combine, fmt_shape, q
from rosetta.spec import ops

NAME = "numpy_ref"


def _layer(call: str, site: Site, weights: tuple[Weight, ...] = ()) -> Snippet:
    return Snippet(forward=(f"{call},  # {fmt_shape(site.out_shape)}",), weights=weights)


def _own(op: object, roles: tuple[str, ...]) -> tuple[Weight, ...]:
    return tuple(Weight(f"{op.name}.{r}", f"params[{q(f'{op.name}.{r}')}]") for r in roles)


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    call = f"conv2d({q(op.name)}, stride={op.stride}, padding={op.padding}, bias={op.bias})"
    return _layer(call, site, _own(op, ("kernel", "bias") if op.bias else ("kernel",)))


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(f"maxpool2d({op.kernel}, stride={op.stride}, padding={op.padding})", site)


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer("relu()", site)


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(f"dropout({op.rate})", site)


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(
        forward=(
            f"flatten(),  # {fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}, C, H, W",
        )
    )


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    call = f"dense({q(op.name)}, bias={op.bias})"
    return _layer(call, site, _own(op, ("kernel", "bias") if op.bias else ("kernel",)))


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(
        f"batchnorm({q(op.name)}, eps={op.eps})", site, _own(op, ("gamma", "beta", "mean", "var"))
    )


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer("global_avgpool()", site)


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(f"embedding({q(op.name)})", site, _own(op, ("table",)))


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    roles = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    return _layer(f"gru({q(op.name)})", site, _own(op, roles))


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(f"layer_norm({q(op.name)}, eps={op.eps})", site, _own(op, ("gamma", "beta")))


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer("gelu()", site)


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(f"position_embedding({q(op.name)})", site, _own(op, ("table",)))


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer(f"attention({q(op.name)}, heads={op.heads})", site, _own(op, ops.ATTENTION_ROLES))


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    return _layer("masked_mean()", site)


def _expr(parts: list[Snippet]) -> list[str]:
    """The parts' lines as list items: each part ends in a comma (its comment kept after it)."""
    out = []
    for p in parts:
        lines = list(p.forward)
        last = lines[-1]
        code, sep, comment = last.partition("  # ")
        if not code.endswith(","):
            lines[-1] = code + "," + (sep + comment if sep else "")
        out.extend("    " + line for line in lines)
    return out


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """``sequential([...])``: the layers in order (the model's own, on token ids, records their
    padding mask: ``tokens=True``)."""
    tokens = site.path == "" and site.at_input and len(site.in_shape) == 1
    return combine(parts, ("sequential([", *_expr(parts), "], tokens=True)" if tokens else "])"))


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """``residual(body, shortcut)``: ``body(x) + shortcut(x)``."""
    lines = ("residual(", *_expr([body, shortcut]), f"),  # {fmt_shape(site.out_shape)}")
    return combine([body, shortcut], lines)


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
)
RENDER = OPS.rendering()
