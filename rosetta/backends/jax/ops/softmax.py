"""softmax in JAX: ``jax.nn.softmax`` over the spec's last per-sample axis in the native layout
(``snippet.batched_axis``): an image's W is axis 2 in NHWC (its channels are last), 3 in NCHW;
a sequence's E is the last axis time-major (T, N, E) or batch-major; a vector's features, 1.
The generated file holds images NHWC and sequences batch-major."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, batched_axis
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.Softmax, site: Site, ctx: Ctx) -> Layer:
    import jax

    last = len(site.in_shape) - 1
    axis = batched_axis(last, site.in_shape, ctx.layout == "NHWC", ctx.time_major)
    return lambda p, x, run: jax.nn.softmax(x, axis=axis)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    axis = batched_axis(len(site.in_shape) - 1, site.in_shape, True)  # the file is NHWC
    return Snippet(forward=(f"{{x}} = jax.nn.softmax({{x}}, axis={axis})",))
