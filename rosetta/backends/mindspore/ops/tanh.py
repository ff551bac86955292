"""tanh in MindSpore: ``nn.Tanh``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Tanh, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import nn

    return nn.Tanh()


def render(op: ops.Tanh, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = ops.tanh({x})",))
