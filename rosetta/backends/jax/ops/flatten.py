"""flatten in JAX: a reshape of the native activations, so ``H, W, C`` order in NHWC (the next
dense kernel's rows are permuted at ``set_params``: ``dense.param_layout``), the spec's ``C, H,
W`` in NCHW. In a wired graph (``site.wired``) an NHWC flatten transposes to C, H, W itself: its
output may reach several layers, so no one dense kernel can permute its rows. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import nhwc_shape
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.Flatten, site: Site, ctx: Ctx) -> Layer:
    if site.wired and ctx.layout == "NHWC" and len(site.in_shape) == 3:
        # in a wired graph no one dense layer can permute its rows: the spec's C, H, W order
        return lambda p, x, run: x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)
    # (N, H, W, C) -> (N, H*W*C) in NHWC: the next dense layer's rows were permuted from the
    # spec's channel-major order at set_params (dense.param_layout); (N, C, H, W) -> (N, C*H*W)
    # in NCHW
    return lambda p, x, run: x.reshape(x.shape[0], -1)


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    if site.wired and len(site.in_shape) == 3:
        line = (
            f"{{x}} = {{x}}.transpose(0, 3, 1, 2).reshape({{x}}.shape[0], -1)  # "
            f"{nhwc_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}, the spec's C, H, W order"
        )
        return Snippet(forward=(line,))
    ctx.pending_flatten = site.in_shape
    line = (
        f"{{x}} = {{x}}.reshape({{x}}.shape[0], -1)  # {nhwc_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, rows in H, W, C order"
    )
    return Snippet(
        forward=(line,),
        notes=(
            "flatten of NHWC activations: H, W, C order; the next dense kernel's rows permuted",
        ),
    )
