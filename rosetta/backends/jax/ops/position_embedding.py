"""position_embedding in JAX: ``T`` rows of the learned ``(P, E)`` table added to ``(N, T, E)``,
from the first (or, generating, from the positions already seen: ``offset``). The table as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run


def build(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    from jax import lax

    def position_layer(p: Params, x: Any, run: Run) -> Any:
        table = p[f"{op.name}.table"]
        if run.decode is not None:  # generating: the rows from the positions already seen on
            return x + lax.dynamic_slice_in_dim(table, run.decode["offset"], x.shape[1], axis=0)
        return x + table[: x.shape[1]]  # (N, T, E) + (T, E)

    return position_layer


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    table = param(f"{op.name}.table")
    line = f"{{x}} = {{x}} + lax.dynamic_slice_in_dim({table}, offset, {{x}}.shape[1])  # positions"
    return Snippet(forward=(line,), weights=(weight(f"{op.name}.table"),))
