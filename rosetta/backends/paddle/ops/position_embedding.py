"""position_embedding in Paddle: ``PositionEmbedding`` (``lowering.py``), a learned ``(P, E)``
parameter ``table`` added to the first T rows; the canonical table is that parameter, as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.PositionEmbedding, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import PositionEmbedding

    layer = PositionEmbedding(op.max_len, site.in_shape[1], ctx.decoding)
    ctx.own(op, layer)
    return layer


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = self.create_parameter([{op.max_len}, {site.in_shape[1]}])",),
        (f"{{x}} = {{x}} + self.{n}[offset : offset + {{x}}.shape[1]]  # learned positions",),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def weights(op: ops.PositionEmbedding, m: nn.Layer) -> list[Binding]:
    return [Binding(f"{op.name}.table", m.table, True, same, same)]
