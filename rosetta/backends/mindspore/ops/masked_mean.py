"""masked_mean in MindSpore: the mean over real tokens (``lowering.MaskedMean``); 0 for a row of
padding only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


MASKED_MEAN = '''
def masked_mean(x, valid):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a row of padding only."""
    w = valid.astype(x.dtype)
    return (x * w.expand_dims(-1)).sum(axis=1) / ops.clamp(w.sum(axis=1, keepdims=True), min=1)
'''
HELPERS = {"masked_mean": MASKED_MEAN}


def build(op: ops.MaskedMean, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import MaskedMean

    return MaskedMean()


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    return Snippet(
        forward=(
            f"{{x}} = masked_mean({{x}}, valid)  # mean over real tokens: "
            f"{fmt_shape(site.out_shape)}",
        ),
        helpers=("masked_mean",),
    )
