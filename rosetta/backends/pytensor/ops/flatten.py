"""flatten in PyTensor: a ``reshape`` of the NHWC activations, so the features come in H, W, C
order, not the spec's C, H, W: the next dense kernel's rows are permuted instead, once, when the
parameters are set (``dense.layout``). In a wired graph (``site.wired``) it transposes to C, H,
W itself: its output may reach several layers, so no one dense kernel can permute its rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape, nhwc
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.Flatten, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.driver import unsupported

    if op.order != "CHW":
        raise unsupported("pytensor", op)
    if site.wired and len(site.in_shape) == 3:
        # in a wired graph no one dense layer can permute its rows: the spec's C, H, W order
        return lambda x, run: x.dimshuffle(0, 3, 1, 2).reshape((x.shape[0], -1))
    # (N, H, W, C) -> (N, H*W*C): the next dense kernel's rows were permuted at set_params
    return lambda x, run: x.reshape((x.shape[0], -1))


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    if site.wired and len(site.in_shape) == 3:
        line = (
            f"{{x}} = {{x}}.dimshuffle(0, 3, 1, 2).reshape(({{x}}.shape[0], -1))  # "
            f"{fmt_shape(nhwc(site.in_shape))} -> {fmt_shape(site.out_shape)}, the spec's C, H, W"
        )
        return Snippet(forward=(line,))
    ctx.pending_flatten = site.in_shape
    line = (
        f"{{x}} = {{x}}.reshape(({{x}}.shape[0], -1))  # {fmt_shape(nhwc(site.in_shape))} -> "
        f"{fmt_shape(site.out_shape)}, rows in H, W, C order"
    )
    return Snippet(
        forward=(line,),
        notes=(
            "flatten of NHWC activations: H, W, C order; the next dense kernel's rows permuted",
        ),
    )
