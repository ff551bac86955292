"""masked_mean in JAX: an ``einsum`` with the mask of real tokens over their count (0 for a row
of padding only). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run


def build(op: ops.MaskedMean, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp

    def masked_mean_layer(p: Params, x: Any, run: Run) -> Any:
        w = run.valid.astype(x.dtype)  # (N, T)
        total = jnp.einsum("nte,nt->ne", x, w, precision=ctx.precision)
        return total / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), 1)

    return masked_mean_layer


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        "{x} = jnp.einsum('nte,nt->ne', {x}, valid.astype({x}.dtype)) / jnp.maximum("
        f"valid.sum(axis=1, keepdims=True), 1)  # mean over real tokens: "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
