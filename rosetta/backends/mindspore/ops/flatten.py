"""flatten in MindSpore: ``nn.Flatten`` of NCHW activations, channel-major (the spec's CHW)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Flatten, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import nn

    if op.order != "CHW":
        raise unsupported("mindspore", op)
    return nn.Flatten()  # (N, C, H, W) -> (N, C*H*W), channel-major


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = ops.flatten({{x}})  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))
