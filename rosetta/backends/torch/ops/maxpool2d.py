"""maxpool2d in PyTorch: ``nn.MaxPool2d``, padding with -inf (never selected), as the spec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.backends.torch.ops import pair, symmetric
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.MaxPool2D, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    sym = symmetric(op.padding)
    if sym is not None and 2 * max(sym) <= min(op.kernel):  # what nn.MaxPool2d accepts
        return nn.MaxPool2d(op.kernel, op.stride, padding=sym)  # pads with -inf
    t, b, left, right = op.padding
    pad = nn.ConstantPad2d((left, right, t, b), float("-inf"))  # never selected, as the spec
    return nn.Sequential(pad, nn.MaxPool2d(op.kernel, op.stride))


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    pad = symmetric(op.padding)
    args = [pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"stride={pair(op.stride)}")
    forward = []
    if pad is None:
        t, b, left, right = op.padding
        forward.append(f'{{x}} = F.pad({{x}}, ({left}, {right}, {t}, {b}), value=float("-inf"))')
    elif pad != (0, 0):
        args.append(f"padding={pair(pad)}")  # PyTorch pads max-pooling with -inf
    forward.append(f"{{x}} = F.max_pool2d({{x}}, {', '.join(args)})  # {fmt_shape(site.out_shape)}")
    return Snippet(forward=tuple(forward))
