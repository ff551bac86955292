"""concat in JAX: ``jnp.concatenate`` along the spec's axis in the native layout
(``snippet.batched_axis``): an image's channels are the last axis in NHWC; a sequence's time is
axis 0 where it runs time-major (``Ctx.time_major``: the GRU's scan). The generated file holds
images NHWC and sequences batch-major."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, batched_axis
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.Concat, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp

    axis = batched_axis(op.axis, site.in_shape, ctx.layout == "NHWC", ctx.time_major)
    return lambda p, xs, run: jnp.concatenate(xs, axis=axis)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    axis = batched_axis(op.axis, site.in_shape, True)  # the file is NHWC
    return Snippet(forward=(f"{{x}} = jnp.concatenate([{parts}], axis={axis})",))
