"""avgpool2d in Chainer: ``F.average_pooling_2d`` (it pads with zeros and divides every window
by ``kh * kw``: the spec's ``count_include_pad``) with ``pad=(ph, pw)`` when the padding is
symmetric, after an explicit zero ``F.pad`` (``lowering.Padded``) when not. Real-cell averages
(``count_include_pad`` false): ``F.average_pooling_nd(..., pad_value=None)`` (padded cells
ignored) for symmetric padding, else ``lowering.RealCellAverage``: the zero-padded input's
average over that of zero-padded ones. No parameters.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import explicit_pad, pair, symmetric
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx

#: the function the generated file calls for real-cell averages over asymmetric padding
REAL_CELL_AVERAGE = '''
def real_cell_average(x, ksize, stride, padding):
    """Average pooling over the zero ``padding`` ((top, bottom), (left, right)), each window
    divided by its real cells: the padded input's average over that of padded ones."""
    width = ((0, 0), (0, 0), *padding)
    ones = chainer.backend.get_array_module(x).ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    total = F.average_pooling_2d(F.pad(x, width, "constant"), ksize, stride=stride)
    real = F.average_pooling_2d(F.pad(ones, width, "constant"), ksize, stride=stride)
    return total / F.broadcast_to(real, total.shape)
'''
HELPERS = {"real_cell_average": REAL_CELL_AVERAGE}


def build(op: ops.AvgPool2D, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import F, Padded, RealCellAverage

    pad = symmetric(op.padding)
    if pad is not None and not op.count_include_pad and any(pad):
        # pad_value=None: padded cells are left out of each window's divisor
        return functools.partial(
            F.average_pooling_nd, ksize=op.kernel, stride=op.stride, pad=pad, pad_value=None
        )
    pool = functools.partial(F.average_pooling_2d, ksize=op.kernel, stride=op.stride)
    if pad is not None:
        return functools.partial(pool, pad=pad)  # zeros, counted in every window
    if op.count_include_pad:
        return Padded(op.padding, 0.0, pool)
    return RealCellAverage(op.padding, pool)


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    pad = symmetric(op.padding)
    shape = fmt_shape(site.out_shape)
    args = [pair(op.kernel), f"stride={pair(op.stride)}"]
    if pad is None and not op.count_include_pad:
        t, b, left, right = op.padding
        line = (
            f"{{x}} = real_cell_average({{x}}, {', '.join(args)}, "
            f"padding=(({t}, {b}), ({left}, {right})))  # {shape}"
        )
        return Snippet(forward=(line,), helpers=("real_cell_average",))
    forward = [] if pad is not None else [explicit_pad(op.padding, "0.0")]
    if pad is not None and any(pad):
        args.append(f"pad={pair(pad)}")
    if pad is not None and any(pad) and not op.count_include_pad:
        call = f"F.average_pooling_nd({{x}}, {', '.join(args)}, pad_value=None)"  # cells left out
    else:
        call = f"F.average_pooling_2d({{x}}, {', '.join(args)})"  # padded zeros counted
    forward.append(f"{{x}} = {call}  # {shape}")
    return Snippet(forward=tuple(forward))
