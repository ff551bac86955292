"""position_embedding in Chainer: ``lowering.PositionEmbedding``, a learned (P, E) parameter
whose first T rows are added. Weights: ``table`` as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.PositionEmbedding, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import PositionEmbedding

    return ctx.own(op, PositionEmbedding(op.max_len, site.in_shape[1], ctx.decoding))


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (
            f"self.{n} = chainer.Parameter(chainer.initializers.Zero(), "
            f"({op.max_len}, {site.in_shape[1]}))",
        ),
        (
            f"{{x}} = {{x}} + F.broadcast_to(self.{n}[offset : offset + {{x}}.shape[1]], "
            "{x}.shape)  # learned positions",
        ),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def to_native(op: ops.PositionEmbedding, params) -> dict:
    return {"table": params[f"{op.name}.table"]}


def to_canonical(op: ops.PositionEmbedding, read: Read) -> dict:
    return {f"{op.name}.table": read("table")}
