"""tied_dense in Paddle: ``TiedLinear`` (``lowering.py``), ``paddle.matmul(x, weight,
transpose_y=True)`` on the tied ``nn.Embedding``'s own ``weight`` (PaddleNLP's GPT head); the
op owns and binds nothing: the table is bound once, by the embedding, so the optimiser holds it
once and its gradient is both uses' sum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, attr, fmt_shape
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.TiedDense, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import TiedLinear

    for owner, layer in ctx.owners:
        if isinstance(owner, ops.Embedding) and owner.name == op.tie:
            return TiedLinear(layer)
    raise BackendError(f"paddle: tied_dense {op.name} ties {op.tie!r}, built no embedding before")


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    tie = attr(op.tie)
    return Snippet(
        (),
        (
            f"{{x}} = paddle.matmul({{x}}, self.{tie}.weight, transpose_y=True)"
            f"  # tied: {tie}'s own (V, E) weight; {fmt_shape(site.out_shape)}",
        ),
        (),
    )
