"""avgpool2d in PyTorch: ``nn.AvgPool2d`` with ``count_include_pad`` as the spec's (PyTorch's own
flag) where the padding is symmetric and at most half the kernel (what ``nn.AvgPool2d``
accepts); other padding is explicit zeros (``nn.ZeroPad2d``) before an unpadded pool when padded
zeros are counted, else ``lowering.RealCellAvgPool2d``: the windows' sums over their real cells'
counts (``F.avg_pool2d(..., divisor_override=1)`` of the padded input and of padded ones).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.backends.torch.ops import pair, symmetric
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build

#: the function the generated file calls for real-cell averages over asymmetric padding
REAL_CELL_AVG_POOL = '''
def real_cell_avg_pool2d(x, kernel, stride, pad):
    """Average pooling over the zero padding ``pad`` (left, right, top, bottom), each window
    divided by its real cells (count_include_pad=False): window sums of x over those of ones."""
    ones = torch.ones_like(x[:1, :1])  # (1, 1, H, W)
    total = F.avg_pool2d(F.pad(x, pad), kernel, stride, divisor_override=1)
    return total / F.avg_pool2d(F.pad(ones, pad), kernel, stride, divisor_override=1)
'''
HELPERS = {"real_cell_avg_pool2d": REAL_CELL_AVG_POOL}


def _native(op: ops.AvgPool2D) -> tuple[int, int] | None:
    """The padding ``nn.AvgPool2d`` takes itself, ``(h, w)``; None where it cannot."""
    sym = symmetric(op.padding)
    return sym if sym is not None and 2 * max(sym) <= min(op.kernel) else None


def build(op: ops.AvgPool2D, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    from rosetta.backends.torch.lowering import RealCellAvgPool2d

    sym = _native(op)
    if sym is not None:
        return nn.AvgPool2d(
            op.kernel, op.stride, padding=sym, count_include_pad=op.count_include_pad
        )
    if not op.count_include_pad:
        return RealCellAvgPool2d(op.kernel, op.stride, op.padding)
    t, b, left, right = op.padding
    return nn.Sequential(nn.ZeroPad2d((left, right, t, b)), nn.AvgPool2d(op.kernel, op.stride))


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    shape = fmt_shape(site.out_shape)
    t, b, left, right = op.padding
    if _native(op) is None and not op.count_include_pad:
        line = (
            f"{{x}} = real_cell_avg_pool2d({{x}}, {pair(op.kernel)}, {pair(op.stride)}, "
            f"({left}, {right}, {t}, {b}))  # {shape}"
        )
        return Snippet(forward=(line,), helpers=("real_cell_avg_pool2d",))
    sym = _native(op)
    args = [pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"stride={pair(op.stride)}")
    forward = []
    if sym is None:
        forward.append(f"{{x}} = F.pad({{x}}, ({left}, {right}, {t}, {b}))  # zeros, counted")
    elif sym != (0, 0):
        args.append(f"padding={pair(sym)}")
        if not op.count_include_pad:
            args.append("count_include_pad=False")  # divide by the real cells only
    forward.append(f"{{x}} = F.avg_pool2d({{x}}, {', '.join(args)})  # {shape}")
    return Snippet(forward=tuple(forward))
