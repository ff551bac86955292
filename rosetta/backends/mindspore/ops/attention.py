"""attention in MindSpore: ``SelfAttention`` (``lowering.py``), composed from ``ops.matmul`` and
``ops.softmax`` with the spec's key padding mask; each of the four ``*_kernel`` (IO, head-major
column blocks) is its ``nn.Dense.weight`` (out, in) transposed, the ``*_bias`` as is; the key
projection has no bias.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same, transpose
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Attention, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import SelfAttention

    cell = SelfAttention(site.in_shape[1], op.heads, ctx.ms_dtype)
    ctx.own(op, cell)
    return cell


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[1]
    ctx.extra["mask"] = True
    roles = ("query", "key", "value", "output")
    weights = []
    for r in roles:
        weights.append(Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.weight", "a.T", "a.T",
                              note="IO -> (out, in)"))  # fmt: skip
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    projections = ", ".join(f"self.{n}_{r}" for r in roles)
    return Snippet(
        tuple(
            f"self.{n}_{r} = nn.Dense({e}, {e}{', has_bias=False' if r == 'key' else ''})"
            for r in roles
        ),
        (
            f"{{x}} = self_attention({{x}}, valid, {projections}, heads={op.heads})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        tuple(weights),
        helpers=("self_attention",),
    )


def weights(op: ops.Attention, m: nn.Cell) -> list[Binding]:
    out = []
    for role in ("query", "key", "value", "output"):
        dense = getattr(m, role)
        out.append(Binding(f"{op.name}.{role}_kernel", dense.weight, True, transpose, transpose))
        if dense.has_bias:  # the key projection has none
            out.append(Binding(f"{op.name}.{role}_bias", dense.bias, True, same, same))
    return out
