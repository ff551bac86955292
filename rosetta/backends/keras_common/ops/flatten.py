"""flatten in Keras: ``layers.Flatten``. Channels-first activations flatten in the spec's
C, H, W order already; channels-last ones in H, W, C order, so the flatten leaves its (C, H, W)
in the context and the next dense layer permutes its kernel rows (``dense.py``); in a wired graph
(``site.wired``) a ``Permute`` to channels-first comes first, since its output may reach several
layers and no one dense kernel can permute its rows. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import nhwc_shape
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Flatten, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    if op.order != "CHW":
        raise BackendError(
            f"backend {ctx.backend!r}: flatten order {op.order!r} is not the spec's CHW"
        )
    if ctx.data_format == "channels_last" and len(site.in_shape) == 3:
        if site.wired:  # no one dense layer can permute its rows: the spec's C, H, W order
            permute, flat = (
                layers.Permute((3, 1, 2), dtype=ctx.dtype),
                layers.Flatten(dtype=ctx.dtype),
            )
            return lambda x: flat(permute(x))
        ctx.flattened_from = tuple(site.in_shape)  # the next dense layer's rows are permuted
    return layers.Flatten(dtype=ctx.dtype)  # channels_first: already C, H, W order


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    if site.wired and len(site.in_shape) == 3:
        line = (
            f"{{x}} = layers.Flatten()(layers.Permute((3, 1, 2))({{x}}))  # "
            f"{nhwc_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}, the spec's C, H, W order"
        )
        return Snippet(forward=(line,))
    ctx.pending_flatten = site.in_shape  # the next dense layer permutes its kernel rows
    line = (
        f"{{x}} = layers.Flatten()({{x}})  # {nhwc_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, rows in H, W, C order"
    )
    return Snippet(
        forward=(line,),
        notes=(
            "flatten of NHWC activations: H, W, C order; the next dense kernel's rows permuted",
        ),
    )
