"""maxpool2d in MindSpore: ``nn.MaxPool2d`` (``lowering.MaxPool2d``: asymmetric padding as an
explicit -inf pad first, since MindSpore's takes one (h, w) pair); padded cells are never selected,
as the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.mindspore.ops import pair
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.MaxPool2D, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import MaxPool2d

    return MaxPool2d(op.kernel, op.stride, op.padding)


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    t, b, left, right = op.padding
    lines, pad = [], ""
    if (t, left) != (b, right):  # asymmetric: MindSpore's pooling takes one (h, w) pair
        lines.append(f"{{x}} = ops.pad({{x}}, ({left}, {right}, {t}, {b}), value=float('-inf'))")
    elif t or left:
        pad = f", padding=({t}, {left})"
    lines.append(f"{{x}} = ops.max_pool2d({{x}}, {pair(op.kernel)}, {pair(op.stride)}{pad})"
                 f"  # {fmt_shape(site.out_shape)}")  # fmt: skip
    return Snippet(forward=tuple(lines))
