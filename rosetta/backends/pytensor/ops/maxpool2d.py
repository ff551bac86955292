"""maxpool2d in PyTensor: the kernel taps stacked on a new last axis, ``argmax`` over it, and the
selected tap kept through ``switch``: the gradient reaches only the *first* maximum in row-major
window order, the spec's rule (``pt.max``'s gradient would reach every tied cell, which a flat
image makes visible); padding is ``-inf`` (never selected). An evaluation graph takes no
gradient, so there the pooling is the ``maximum`` of the taps, one fused elementwise pass (the
same values exactly) instead of a K-fold stacked copy, an ``argmax`` and a ``switch``. The
generated file keeps the ``argmax`` form throughout: its ``forward(p, x, None)`` also serves
its gradient check.
"""

from __future__ import annotations

import functools
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
    "max_pool": '''
def max_pool(x, n, kernel, stride, padding, out_hw):
    """Max pooling of NHWC ``x`` (batch size ``n``); padded cells are -inf; the gradient goes to
    the first maximum of each window (argmax), not to every tied cell."""
    window = pt.stack(taps(pad(x, n, padding, -np.inf), kernel, stride, out_hw), axis=-1)
    first = pt.argmax(window, axis=-1, keepdims=True)
    return pt.switch(pt.eq(pt.arange(kernel[0] * kernel[1]), first), window, 0.0).sum(axis=-1)
''',
}


def build(op: ops.MaxPool2D, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    from rosetta.backends.pytensor.lowering import padded, tap_slices

    k = op.kernel[0] * op.kernel[1]

    def maxpool2d_layer(x: Any, run: Run) -> Any:
        xp = padded(x, run, site, op.padding, ctx.const(-np.inf))  # padded cells never win
        views = tap_slices(xp, site, op.kernel, op.stride)
        if not run.training:  # no gradient to route: one fused pass over the K views
            return functools.reduce(pt.maximum, views)  # (N, Ho, Wo, C)
        stacked = pt.stack(views, axis=-1)  # (N, Ho, Wo, C, K)
        first = pt.argmax(stacked, axis=-1, keepdims=True)  # the first maximum on ties
        chosen = pt.eq(pt.arange(k), first)  # one-hot over the window
        return pt.sum(pt.switch(chosen, stacked, ctx.const(0.0)), axis=-1)  # (N, Ho, Wo, C)

    return maxpool2d_layer


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = max_pool({{x}}, n, {op.kernel}, {op.stride}, {op.padding}, {out_hw(site)})"
        f"  # {fmt_shape(nhwc(site.out_shape))}"
    )
    return Snippet(forward=(line,), helpers=("pad", "taps", "max_pool"))
