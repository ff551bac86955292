"""concat in Keras: ``layers.Concatenate`` along the spec's axis in the data format (an
image's channels are the last axis channels-last: ``snippet.batched_axis``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, batched_axis
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Concat, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    axis = batched_axis(op.axis, site.in_shape, ctx.data_format == "channels_last")
    return layers.Concatenate(axis=axis, dtype=ctx.dtype)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    axis = batched_axis(op.axis, site.in_shape, True)  # the file is channels-last
    return Snippet(forward=(f"{{x}} = layers.Concatenate(axis={axis})([{parts}])",))
