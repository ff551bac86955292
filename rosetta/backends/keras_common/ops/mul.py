"""mul in Keras: ``layers.Multiply`` (a variadic layer: the list of its inputs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Mul, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    return layers.Multiply(dtype=ctx.dtype)


def render(op: ops.Mul, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = layers.Multiply()([{parts}])",))
