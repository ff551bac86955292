"""embedding in Keras: ``layers.Embedding`` (id 0 an ordinary row), (N, T) -> (N, T, E); the
table is its ``embeddings``, as stored. The layer is recorded by op name (``Ctx.embeddings``)
and the generated file names it (``layer_variable``): a ``tied_dense`` holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Binding, identity
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Embedding, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    layer = layers.Embedding(op.vocab, op.dim, dtype=ctx.dtype, name=ctx.layer_name(op.name))
    ctx.bind(weights(op, layer, ctx))
    ctx.embeddings[op.name] = layer  # a tied_dense's table
    return layer  # (N, T) -> (N, T, E)


def render(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n, v = attr(op.name), layer_variable(op.name)
    lines = (
        f"{v} = layers.Embedding({op.vocab}, {op.dim}, name={q(n)})",
        f"{{x}} = {v}({{x}})  # ids {fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}",
    )
    return Snippet(
        forward=lines, weights=(Weight(f"{op.name}.table", f"{get_layer(n)}.embeddings"),)
    )


def layer_variable(name: str) -> str:
    """The generated ``build_model``'s variable holding the embedding layer named ``name``."""
    return f"{attr(name)}_layer"


def weights(op: ops.Embedding, layer: layers.Embedding, ctx: Ctx) -> Binding:
    return Binding((f"{op.name}.table",), lambda: (layer.embeddings,), identity, identity)
