"""avgpool2d in JAX: ``lax.reduce_window(add)`` over zero padding, then a division: by
``kh * kw`` where padded zeros are counted (``count_include_pad``), else by each window's real
cells, the same ``reduce_window(add)`` of ones over the image (XLA folds it to a constant). No
parameters.
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
    "avg_pool": '''
def avg_pool(x, kernel, stride, padding, count_include_pad):
    """Average pooling of NHWC ``x`` over zero padding: each window's sum over kh * kw (padded
    zeros counted) or over its real cells (the same sum of ones over the image)."""
    window, strides, pads = (1, *kernel, 1), (1, *stride, 1), ((0, 0), *padding, (0, 0))
    total = lax.reduce_window(x, 0.0, lax.add, window, strides, pads)
    if count_include_pad:
        return total / (kernel[0] * kernel[1])
    ones = jnp.ones((1, x.shape[1], x.shape[2], 1), x.dtype)  # (1, H, W, 1)
    return total / lax.reduce_window(ones, 0.0, lax.add, window, strides, pads)
''',
}


def build(op: ops.AvgPool2D, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp
    from jax import lax

    top, bottom, left, right = op.padding
    window = ctx.spatial(op.kernel, 1)
    strides = ctx.spatial(op.stride, 1)
    padding = ctx.spatial(((top, bottom), (left, right)), (0, 0))
    ones_shape = ctx.spatial(site.in_shape[1:], 1)  # (1, H, W, 1) or (1, 1, H, W)
    size = op.kernel[0] * op.kernel[1]

    def avgpool2d_layer(p: Params, x: Any, run: Run) -> Any:
        zero = np.array(0, x.dtype)
        total = lax.reduce_window(x, zero, lax.add, window, strides, padding)
        if op.count_include_pad:
            return total / size  # padded zeros counted
        ones = jnp.ones(ones_shape, x.dtype)
        return total / lax.reduce_window(ones, zero, lax.add, window, strides, padding)

    return avgpool2d_layer


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = avg_pool({{x}}, {op.kernel}, {op.stride}, {pads(op.padding)}, "
        f"{op.count_include_pad})  # {nhwc_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("avg_pool",))
