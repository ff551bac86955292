"""global_avgpool in JAX: ``jnp.mean`` over the spatial axes, ``(N, C)`` out. No parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import nhwc_shape
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.GlobalAvgPool, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp

    return lambda p, x, run: jnp.mean(x, axis=ctx.spatial_axes)  # (N, ., ., .) -> (N, C)


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = {{x}}.mean(axis=(1, 2))  # {nhwc_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
