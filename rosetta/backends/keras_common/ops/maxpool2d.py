"""maxpool2d in Keras: ``layers.MaxPooling2D``, ``padding="same"`` where it pads exactly the
spec's numbers, else an explicit ``NegInfPadding2D`` (-inf: a padded cell is never selected, as
the spec says) before a "valid" pool. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import nhwc_shape, pair
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.MaxPool2D, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    from rosetta.backends.keras_common.lowering import NegInfPadding2D, after, keras_padding

    explicit, padding = keras_padding(op, site)
    pool = layers.MaxPooling2D(
        op.kernel, strides=op.stride, padding=padding, data_format=ctx.data_format, dtype=ctx.dtype
    )
    if explicit is None:
        return pool
    return after(NegInfPadding2D(explicit, ctx.data_format, dtype=ctx.dtype), pool)


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    t, b, left, right = op.padding
    forward = []
    if any(op.padding):
        pads = f"[[0, 0], [{t}, {b}], [{left}, {right}], [0, 0]]"
        forward.append(
            f'{{x}} = keras.ops.pad({{x}}, {pads}, constant_values=float("-inf"))'
            "  # a padded cell never wins"
        )
    args = [pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"strides={pair(op.stride)}")
    forward.append(
        f"{{x}} = layers.MaxPooling2D({', '.join(args)})({{x}})  # {nhwc_shape(site.out_shape)}"
    )
    return Snippet(forward=tuple(forward))
