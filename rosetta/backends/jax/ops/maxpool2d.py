"""maxpool2d in JAX: ``lax.reduce_window(max)`` over the spatial axes, padded cells ``-inf``
(never selected). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import nhwc_shape, pads
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "max_pool": '''
def max_pool(x, kernel, stride, padding):
    """Max pooling of NHWC ``x``; padded cells are -inf (never selected)."""
    window, strides = (1, *kernel, 1), (1, *stride, 1)
    return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, ((0, 0), *padding, (0, 0)))
''',
}


def build(op: ops.MaxPool2D, site: Site, ctx: Ctx) -> Layer:
    from jax import lax

    # (A reshape-and-max for non-overlapping windows was 5x faster alone on XLA:CPU, forward and
    # backward, but the whole CNN step did not move (1.672 s both): kept as reduce_window.)
    top, bottom, left, right = op.padding
    window = ctx.spatial(op.kernel, 1)
    strides = ctx.spatial(op.stride, 1)
    padding = ctx.spatial(((top, bottom), (left, right)), (0, 0))

    def maxpool2d_layer(p: Params, x: Any, run: Run) -> Any:
        # padded cells are -inf: they never win
        return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, strides, padding)

    return maxpool2d_layer


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = max_pool({{x}}, {op.kernel}, {op.stride}, {pads(op.padding)})"
        f"  # {nhwc_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("max_pool",))
