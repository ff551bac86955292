"""dropout in MindSpore: ``GatedDropout`` (``lowering.py``), whose rate is a parameter the step
reads, so that the gate switches it off inside the timed program; the file writes ``nn.Dropout(p=
rate)``, inverted dropout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.Dropout, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import GatedDropout

    return GatedDropout(op.rate, ctx.ms_dtype)


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    i = ctx.extra["dropout"] = ctx.extra.get("dropout", 0) + 1
    return Snippet(
        (f"self.dropout{i} = nn.Dropout(p={op.rate})",), (f"{{x}} = self.dropout{i}({{x}})",)
    )
