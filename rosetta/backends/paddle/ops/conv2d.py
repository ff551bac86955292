"""conv2d in Paddle: ``nn.Conv2D`` on NCHW activations (Paddle's default ``data_format``),
asymmetric padding as its ``[top, bottom, left, right]``; the canonical OIHW kernel is
``Conv2D.weight``'s own layout, the bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.paddle.ops import pad_text, padding_arg, pair
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Conv2D, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    conv = nn.Conv2D(
        site.in_shape[0],
        op.out_channels,
        op.kernel,
        stride=op.stride,
        padding=padding_arg(op.padding),  # [top, bottom, left, right] where asymmetric
        bias_attr=None if op.bias else False,
        groups=op.groups,
    )
    ctx.own(op, conv)
    return conv


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    args = [str(site.in_shape[0]), str(op.out_channels), pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"stride={pair(op.stride)}")
    if any(op.padding):
        args.append(f"padding={pad_text(op.padding)}")
    if not op.bias:
        args.append("bias_attr=False")
    if op.groups != 1:
        args.append(f"groups={op.groups}")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = nn.Conv2D({', '.join(args)})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
    )


def weights(op: ops.Conv2D, m: nn.Layer) -> list[Binding]:
    out = [Binding(f"{op.name}.kernel", m.weight, True, same, same)]
    if op.bias:
        out.append(Binding(f"{op.name}.bias", m.bias, True, same, same))
    return out
