"""concat in MindSpore: ``ops.cat`` of its inputs along the spec's axis (+1 for the batch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Concat, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import Concat

    return Concat(op.axis + 1)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = ops.cat([{parts}], axis={op.axis + 1})",))
