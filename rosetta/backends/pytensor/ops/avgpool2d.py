"""avgpool2d in PyTensor, which has no pooling op of its own: the kernel taps (strided slices of
the zero-padded input, as max-pooling's) summed, then divided by ``kh * kw`` where padded zeros
are counted (``count_include_pad``), else by each window's real cells: the same tap sum of a
padded image of ones, a constant of the graph (the shapes are static).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import out_hw
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape, nhwc
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "avg_pool": '''
def avg_pool(x, n, kernel, stride, padding, out_hw, count_include_pad):
    """Average pooling of NHWC ``x`` (batch size ``n``) over zero padding: the taps' sum over
    kh * kw (padded zeros counted) or over each window's real cells (the taps' sum of ones)."""
    total = sum(taps(pad(x, n, padding, 0.0), kernel, stride, out_hw))  # (N, Ho, Wo, C)
    if count_include_pad:
        return total / (kernel[0] * kernel[1])
    top, bottom, left, right = padding
    _, h, w, _ = x.type.shape
    ones = np.pad(np.ones((1, h, w, 1)), ((0, 0), (top, bottom), (left, right), (0, 0)))
    real = sum(taps(ones, kernel, stride, out_hw))  # (1, Ho, Wo, 1): real cells per window
    return total / pt.constant(real.astype(x.dtype))
''',
}


def real_cells(op: ops.AvgPool2D, site: Site) -> np.ndarray:
    """Each window's number of real (unpadded) cells, (1, Ho, Wo, 1) float64: the tap sum of
    the zero-padded ones."""
    from rosetta.backends.pytensor.lowering import tap_slices

    _, h, w = site.in_shape
    t, b, left, right = op.padding
    ones = np.pad(np.ones((1, h, w, 1)), ((0, 0), (t, b), (left, right), (0, 0)))  # (1, Hp, Wp, 1)
    return sum(tap_slices(ones, site, op.kernel, op.stride))


def build(op: ops.AvgPool2D, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    from rosetta.backends.pytensor.lowering import padded, tap_slices

    if op.count_include_pad:
        divisor = ctx.const(float(op.kernel[0] * op.kernel[1]))  # padded zeros counted
    else:
        divisor = pt.constant(real_cells(op, site).astype(ctx.dtype))  # (1, Ho, Wo, 1)

    def avgpool2d_layer(x: Any, run: Run) -> Any:
        xp = padded(x, run, site, op.padding, ctx.const(0.0))  # (N, Hp, Wp, C)
        total = sum(tap_slices(xp, site, op.kernel, op.stride))  # (N, Ho, Wo, C)
        return total / divisor

    return avgpool2d_layer


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = avg_pool({{x}}, n, {op.kernel}, {op.stride}, {op.padding}, {out_hw(site)}, "
        f"{op.count_include_pad})  # {fmt_shape(nhwc(site.out_shape))}"
    )
    return Snippet(forward=(line,), helpers=("pad", "taps", "avg_pool"))
