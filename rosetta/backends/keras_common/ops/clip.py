"""clip in Keras: ``layers.ReLU(max_value=6)`` for [0, 6], else ``keras.ops.clip`` in a
``Lambda`` (Keras has no clipping layer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Clip, site: Site, ctx: Ctx) -> Layer:
    import keras
    from keras import layers

    if (op.min, op.max) == (0.0, 6.0):
        return layers.ReLU(max_value=6.0, dtype=ctx.dtype)
    lo, hi = op.min, op.max

    def clip(x):  # bounds in the input's dtype: keras-on-torch made them float32 (1.2e-8 off)
        cast = keras.ops.convert_to_tensor
        return keras.ops.clip(x, cast(lo, dtype=x.dtype), cast(hi, dtype=x.dtype))

    return layers.Lambda(clip, dtype=ctx.dtype)


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    if (op.min, op.max) == (0.0, 6.0):
        return Snippet(forward=("{x} = layers.ReLU(max_value=6.0)({x})",))
    lo, hi = (f"keras.ops.convert_to_tensor({v!r}, dtype=t.dtype)" for v in (op.min, op.max))
    line = f"{{x}} = layers.Lambda(lambda t: keras.ops.clip(t, {lo}, {hi}))({{x}})"
    return Snippet(forward=(line,))
