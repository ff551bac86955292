"""embedding in Paddle: ``nn.Embedding`` (id 0 an ordinary row); the ``(V, E)`` table is its
weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Embedding, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    layer = nn.Embedding(op.vocab, op.dim)  # (N, T) -> (N, T, E); id 0 is an ordinary row
    ctx.own(op, layer)
    return layer


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = nn.Embedding({op.vocab}, {op.dim})",),
        (
            f"{{x}} = self.{n}({{x}})  # ids {fmt_shape(site.in_shape)} -> "
            f"{fmt_shape(site.out_shape)}",
        ),
        (Weight(f"{op.name}.table", f"model.{n}.weight"),),
    )


def weights(op: ops.Embedding, m: nn.Layer) -> list[Binding]:
    return [Binding(f"{op.name}.table", m.weight, True, same, same)]
