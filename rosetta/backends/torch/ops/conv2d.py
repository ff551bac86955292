"""conv2d in PyTorch: ``nn.Conv2d`` (asymmetric padding as ``ZeroPad2d`` before it); the
canonical OIHW kernel is ``Conv2d.weight``'s own layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.backends.torch.ops import pair, symmetric
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.Conv2D, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    sym = symmetric(op.padding)
    conv = nn.Conv2d(
        site.in_shape[0],
        op.out_channels,
        op.kernel,
        stride=op.stride,
        padding=sym if sym is not None else 0,
        bias=op.bias,
        groups=op.groups,
    )
    ctx.own(op, conv)
    if sym is not None:
        return conv
    t, b, left, right = op.padding
    return nn.Sequential(nn.ZeroPad2d((left, right, t, b)), conv)


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    pad = symmetric(op.padding)
    args = [str(site.in_shape[0]), str(op.out_channels), pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"stride={pair(op.stride)}")
    if pad and pad != (0, 0):
        args.append(f"padding={pair(pad)}")
    if not op.bias:
        args.append("bias=False")
    if op.groups != 1:
        args.append(f"groups={op.groups}")
    forward = []
    if pad is None:
        t, b, left, right = op.padding
        forward.append(f"{{x}} = F.pad({{x}}, ({left}, {right}, {t}, {b}))  # asymmetric padding")
    forward.append(f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet((f"self.{n} = nn.Conv2d({', '.join(args)})",), tuple(forward), tuple(weights))


def weights(op: ops.Conv2D, m: nn.Module) -> list[Binding]:
    out = [Binding(f"{op.name}.kernel", m.weight, True, same, same)]
    if op.bias:
        out.append(Binding(f"{op.name}.bias", m.bias, True, same, same))
    return out
