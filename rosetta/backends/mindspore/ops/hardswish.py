"""hardswish in MindSpore: ``nn.HSwish``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.HardSwish, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import nn

    return nn.HSwish()


def render(op: ops.HardSwish, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = ops.hardswish({x})",))
