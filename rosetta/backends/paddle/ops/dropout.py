"""dropout in Paddle: ``GatedDropout`` (``lowering.py``), whose rate is a buffer the step reads, so
that the gate switches it off inside the timed program (under ``paddle.jit.to_static`` too);
the file writes ``nn.Dropout``, whose default mode ``upscale_in_train`` is inverted dropout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Dropout, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import GatedDropout

    return GatedDropout(op.rate)


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    # a layer, numbered in graph order, so that it can be switched off alone (the generated
    # file's set_mode); nn.Dropout's mode "upscale_in_train" (its default) is inverted dropout
    i = ctx.extra["dropout"] = ctx.extra.get("dropout", 0) + 1
    return Snippet(
        (f"self.dropout{i} = nn.Dropout({op.rate})",), (f"{{x}} = self.dropout{i}({{x}})",)
    )
