"""tanh in Keras: ``layers.Activation("tanh")``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Tanh, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    return layers.Activation("tanh", dtype=ctx.dtype)


def render(op: ops.Tanh, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=('{x} = layers.Activation("tanh")({x})',))
