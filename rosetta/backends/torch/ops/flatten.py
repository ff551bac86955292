"""flatten in PyTorch: ``nn.Flatten(1)`` in logical NCHW order, the spec's channel-major CHW in
every memory format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.Flatten, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    if op.order != "CHW":
        raise unsupported("torch", op)
    return nn.Flatten(1)  # (N, C, H, W) -> (N, C*H*W), logical (channel-major) order


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = torch.flatten({{x}}, 1)  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))
