"""softmax in MindSpore: ``nn.Softmax`` over the last axis."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Softmax, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import nn

    return nn.Softmax(axis=-1)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = ops.softmax({x}, axis=-1)",))
