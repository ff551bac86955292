"""softmax in Keras: ``layers.Softmax`` over the spec's last per-sample axis in the data format
(``snippet.batched_axis``): an image's W is axis 2 channels-last (its channels are last), 3
channels-first; a sequence's E and a vector's features are the last axis. No mask reaches it
(the masked ops take theirs by hand), so Keras' masked softmax never applies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, batched_axis
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Softmax, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    last = len(site.in_shape) - 1
    axis = batched_axis(last, site.in_shape, ctx.data_format == "channels_last")
    return layers.Softmax(axis=axis, dtype=ctx.dtype)


def render(op: ops.Softmax, site: Site, ctx: RenderCtx) -> Snippet:
    axis = batched_axis(len(site.in_shape) - 1, site.in_shape, True)  # the file is channels-last
    return Snippet(forward=(f"{{x}} = layers.Softmax(axis={axis})({{x}})",))
