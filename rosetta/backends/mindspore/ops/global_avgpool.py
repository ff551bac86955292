"""global_avgpool in MindSpore: the mean over H and W of NCHW activations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.GlobalAvgPool, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import GlobalAvgPool

    return GlobalAvgPool()  # (N, C, H, W) -> (N, C)


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    shapes = f"{fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
    return Snippet(forward=(f"{{x}} = {{x}}.mean(axis=(2, 3))  # {shapes}",))
