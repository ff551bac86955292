"""position_embedding in MindSpore: a learned ``(max_len, E)`` table added to the first T rows
(``lowering.PositionEmbedding``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.PositionEmbedding, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import PositionEmbedding

    cell = PositionEmbedding(op.max_len, site.in_shape[1], ctx.ms_dtype)
    ctx.own(op, cell)
    return cell


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    shape = f"({op.max_len}, {site.in_shape[1]})"
    return Snippet(
        (f"self.{n} = ms.Parameter(ops.zeros({shape}, dtype), name=\"{n}\")",),
        (f"{{x}} = {{x}} + self.{n}[: {{x}}.shape[1]]  # learned positions",),
        (Weight(f"{op.name}.table", f"model.{n}"),),
    )


def weights(op: ops.PositionEmbedding, m: nn.Cell) -> list[Binding]:
    return [Binding(f"{op.name}.table", m.table, True, same, same)]
