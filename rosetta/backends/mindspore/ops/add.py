"""add in MindSpore: the elementwise sum of its inputs (``lowering.Sum``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Add, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import Sum

    return Sum()


def render(op: ops.Add, site: Site, ctx: RenderCtx) -> Snippet:
    terms = " + ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = {terms}",))
