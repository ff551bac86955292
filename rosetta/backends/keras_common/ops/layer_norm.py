"""layer_norm in Keras: ``layers.LayerNormalization`` over the last axis with the spec's
epsilon; ``gamma, beta`` as stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Binding, identity
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.LayerNorm, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    layer = layers.LayerNormalization(
        axis=-1, epsilon=op.eps, dtype=ctx.dtype, name=ctx.layer_name(op.name)
    )
    ctx.bind(weights(op, layer, ctx))
    return layer


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = f"{{x}} = layers.LayerNormalization(epsilon={op.eps}, name={q(n)})({{x}})"
    return Snippet(
        forward=(line,),
        weights=(
            Weight(f"{op.name}.gamma", f"{get_layer(n)}.gamma"),
            Weight(f"{op.name}.beta", f"{get_layer(n)}.beta"),
        ),
    )


def weights(op: ops.LayerNorm, layer: layers.LayerNormalization, ctx: Ctx) -> Binding:
    names = (f"{op.name}.gamma", f"{op.name}.beta")
    return Binding(names, lambda: (layer.gamma, layer.beta), identity, identity)
