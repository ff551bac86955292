"""global_avgpool in Keras: ``layers.GlobalAveragePooling2D``, (N, C, H, W) -> (N, C) in either
data format. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import nhwc_shape
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.GlobalAvgPool, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    return layers.GlobalAveragePooling2D(data_format=ctx.data_format, dtype=ctx.dtype)


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = layers.GlobalAveragePooling2D()({{x}})  # {nhwc_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
