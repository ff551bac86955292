"""embedding in PyTensor: advanced indexing of the table by the transposed ids, so the vectors
come out time-major (T, N, E), what the GRU's ``scan`` runs over. Weights: the table as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Embedding, site: Site, ctx: Ctx) -> Layer:
    table = ctx.shared(f"{op.name}.table", (op.vocab, op.dim))
    # ids (N, T) -> time-major vectors (T, N, E): what the GRU's scan runs over
    return lambda x, run: table[x.T]


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = {param(f'{op.name}.table')}[{{x}}]  # ids {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=(weight(f"{op.name}.table"),))


def layout(op: ops.Embedding, prev: Prev) -> dict[str, Layout]:
    """No conversion: the table as is."""
    return {}
