"""position_embedding in Keras: ``PositionEmbedding``, a learned ``(max_len, E)`` table added to
the first T positions (``keras.ops``: the same layer on every engine), or generating the T
positions from the offset (``Ctx.decoding``: ``keras.ops.slice``); the table as stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Binding, identity
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer, PositionEmbedding

POSITION_EMBEDDING = '''
class PositionEmbedding(layers.Layer):
    """Learned positions: x + table[:T]."""

    def __init__(self, max_len, dim, **kwargs):
        super().__init__(**kwargs)
        self.max_len, self.dim = max_len, dim

    def build(self, input_shape):
        self.table = self.add_weight(shape=(self.max_len, self.dim), initializer="zeros")

    def call(self, x):
        return x + self.table[: keras.ops.shape(x)[1]]
'''
HELPERS = {"PositionEmbedding": POSITION_EMBEDDING}


def build(op: ops.PositionEmbedding, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.keras_common.lowering import PositionEmbedding

    layer = PositionEmbedding(
        op.max_len,
        site.in_shape[1],
        decoding=ctx.decoding,  # generating: the rows from the positions already seen
        dtype=ctx.dtype,
        name=ctx.layer_name(op.name),
    )
    ctx.bind(weights(op, layer, ctx))
    return layer


def render(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = f"{{x}} = PositionEmbedding({op.max_len}, {site.in_shape[1]}, name={q(n)})({{x}})"
    return Snippet(
        forward=(line,),
        weights=(Weight(f"{op.name}.table", f"{get_layer(n)}.table"),),
        helpers=("PositionEmbedding",),
    )


def weights(op: ops.PositionEmbedding, layer: PositionEmbedding, ctx: Ctx) -> Binding:
    return Binding((f"{op.name}.table",), lambda: (layer.table,), identity, identity)
