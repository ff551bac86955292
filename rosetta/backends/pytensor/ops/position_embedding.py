"""position_embedding in PyTensor: learned positions, the table's first T rows added to the
time-major (T, N, E) activations. Weights: the table as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    t, e = site.in_shape
    table = ctx.shared(f"{op.name}.table", (op.max_len, e))
    # time-major (T, N, E) + the first T rows (T, 1, E)
    return lambda x, run: x + table[:t].dimshuffle(0, "x", 1)


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    t = site.in_shape[0]
    line = (
        f"{{x}} = {{x}} + {param(f'{op.name}.table')}[:{t}]  # learned positions, "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=(weight(f"{op.name}.table"),))


def layout(op: ops.PositionEmbedding, prev: Prev) -> dict[str, Layout]:
    """No conversion: the table as is."""
    return {}
