"""embedding in JAX: ``jnp.take`` of the table's rows, time-major ``(T, N, E)`` out when a GRU's
scan follows (``Ctx.time_major``). The table ``(V, E)`` as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.Embedding, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp

    # token ids (N, T) -> time-major vectors (T, N, E): the GRU's scan runs over axis 0;
    # batch-major (N, T, E) where no scan follows (attention works on the batch axis first)
    if ctx.time_major:
        return lambda p, x, run: jnp.take(p[f"{op.name}.table"], x.T, axis=0)
    return lambda p, x, run: jnp.take(p[f"{op.name}.table"], x, axis=0)


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = {param(f'{op.name}.table')}[{{x}}]  # ids {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=(weight(f"{op.name}.table"),))
