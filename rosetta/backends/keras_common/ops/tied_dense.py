"""tied_dense in Keras: ``TiedDense``, a layer holding the tied ``layers.Embedding`` and
computing ``x @ embeddings^T`` (no bias): one variable, the embedding's table, read by both
layers, so the model lists it once, the optimiser steps it once, and its gradient is the sum of
both uses. The op owns no parameter and binds nothing: the embedding binds ``<tie>.table``, and
the optimiser's weight decay treats the table as the spec's roles say (``table`` does not
decay). The generated file names the embedding layer so the head can hold it
(``embedding.py``'s two lines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops.embedding import layer_variable
from rosetta.backends.snippet import RenderCtx, Snippet, attr, fmt_shape, q
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer

TIED_DENSE = '''
class TiedDense(layers.Layer):
    """A dense layer without bias whose kernel is an embedding's table transposed (weight
    tying): x @ table^T. It holds the embedding layer: one variable, trained once, its
    gradient the sum of both uses (Keras lists a shared variable once)."""

    def __init__(self, embedding, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding

    def call(self, x):
        table = keras.ops.cast(self.embedding.embeddings, self.compute_dtype)  # (V, E)
        return keras.ops.matmul(x, keras.ops.transpose(table))  # (..., E) @ (E, V)
'''
HELPERS = {"TiedDense": TIED_DENSE}


def build(op: ops.TiedDense, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.keras_common.lowering import TiedDense

    embedding = ctx.embeddings.get(op.tie)
    if embedding is None:
        raise BackendError(
            f"{ctx.backend}: tied_dense {op.name} ties {op.tie!r}, built no embedding before"
        )
    return TiedDense(embedding, dtype=ctx.dtype, name=ctx.layer_name(op.name))  # (.., E) -> V


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = TiedDense({layer_variable(op.tie)}, name={q(attr(op.name))})({{x}})"
        f"  # {fmt_shape(site.out_shape)}: x @ {op.tie}'s table^T"
    )
    return Snippet(forward=(line,), helpers=("TiedDense",))
