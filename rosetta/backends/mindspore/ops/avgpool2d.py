"""avgpool2d in MindSpore: ``nn.AvgPool2d`` with ``count_include_pad`` (``lowering.AvgPool2d``:
asymmetric padding as a zero pad first, divided by the real cells where they alone count).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


AVG_POOL = '''
def avg_pool2d(x, kernel, stride, padding, count_include_pad):
    """Average pooling with (top, bottom, left, right) padding. Float32 and symmetric padding:
    ops.avg_pool2d; else (its CPU kernel computes float64 in float32, and takes one (h, w)
    padding pair) the window sums written out, divided by the area or the real cells."""
    t, b, left, right = padding
    if x.dtype != ms.float64 and (t, left) == (b, right):
        return ops.avg_pool2d(x, kernel, stride, (t, left), count_include_pad=count_include_pad)
    (kh, kw), (sh, sw) = kernel, stride

    def sums(a):
        a = ops.pad(a, (left, right, t, b)) if any(padding) else a
        ho, wo = (a.shape[2] - kh) // sh + 1, (a.shape[3] - kw) // sw + 1
        return sum(a[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                   for i in range(kh) for j in range(kw))

    if count_include_pad or not any(padding):
        return sums(x) / (kh * kw)
    return sums(x) / sums(ops.ones((1, 1, *x.shape[2:]), x.dtype))
'''
HELPERS = {"avg_pool2d": AVG_POOL}


def build(op: ops.AvgPool2D, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import AvgPool2d

    return AvgPool2d(op.kernel, op.stride, op.padding, op.count_include_pad, ctx.ms_dtype)


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = avg_pool2d({{x}}, {tuple(op.kernel)}, {tuple(op.stride)}, {tuple(op.padding)}, "
        f"{op.count_include_pad})  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("avg_pool2d",))
