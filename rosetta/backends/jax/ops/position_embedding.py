"""position_embedding in JAX: the first ``T`` rows of the learned ``(P, E)`` table added to
``(N, T, E)``. The table as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    t = site.in_shape[0]
    return lambda p, x, run: x + p[f"{op.name}.table"][:t]  # (N, T, E) + (T, E)


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = {{x}} + {param(f'{op.name}.table')}[: {{x}}.shape[1]]  # learned positions"
    return Snippet(forward=(line,), weights=(weight(f"{op.name}.table"),))
