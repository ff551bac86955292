"""dropout in Keras: ``GatedDropout``, Keras' own inverted ``Dropout`` (same rate, seed
generator, mask and scaling) whose training-mode output is selected by ``ctx.dropout_on``, a
boolean variable read inside the compiled program (``Model.set_dropout`` flips it without a
retrace). No parameters. An engine may supply its own (``Ctx.native["dropout"]``: keras_torch's
PyTorch kernel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Dropout, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.keras_common.lowering import GatedDropout

    cls = ctx.native.get("dropout", GatedDropout)  # an engine's own kernel (keras_torch)
    layer = cls(op.rate, ctx.dropout_on, seed=ctx.next_seed(), dtype=ctx.dtype)
    return layer if ctx.training is None else lambda x: layer(x, training=ctx.training)


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = layers.Dropout({op.rate})({{x}})",))
