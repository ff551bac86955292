"""position_embedding in PyTorch: a learned ``(P, E)`` table added to the first T rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.PositionEmbedding, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import PositionEmbedding

    layer = PositionEmbedding(op.max_len, site.in_shape[1], ctx.decoding)
    ctx.own(op, layer)
    return layer


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.Parameter(torch.zeros({op.max_len}, {site.in_shape[1]}))",),
        (f"{{x}} = {{x}} + self.{n}[offset : offset + {{x}}.shape[1]]  # learned positions",),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def weights(op: ops.PositionEmbedding, m: nn.Module) -> list[Binding]:
    return [Binding(f"{op.name}.table", m.table, True, same, same)]
