"""masked_mean in Paddle: ``MaskedMean`` (``lowering.py``), the mean over real tokens (0 for a
row of padding only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


MASKED_MEAN = '''
def masked_mean(x, valid):
    """(N, T, E) -> (N, E): the mean over real tokens; 0 for a sequence of padding only."""
    w = valid.astype(x.dtype)  # (N, T)
    return (x * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clip(min=1)
'''
HELPERS = {"masked_mean": MASKED_MEAN}


def build(op: ops.MaskedMean, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import MaskedMean

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
