"""masked_mean in Keras: ``MaskedMean``, the masked sum over real tokens / max(count, 1) (0 for
a row of padding only); it reads the model's mask of real tokens. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer

MASKED_MEAN = '''
class MaskedMean(layers.Layer):
    """The mean over real tokens (0 for a row of padding only)."""

    def call(self, x, valid):
        w = keras.ops.cast(valid, self.compute_dtype)
        total = keras.ops.einsum("nte,nt->ne", x, w)
        return total / keras.ops.maximum(keras.ops.sum(w, axis=1, keepdims=True), 1.0)
'''
HELPERS = {"MaskedMean": MASKED_MEAN}


def build(op: ops.MaskedMean, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.keras_common.lowering import MaskedMean, takes_mask

    layer = MaskedMean(dtype=ctx.dtype)
    return takes_mask(lambda x, valid: layer(x, valid))


def render(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = (
        f"{{x}} = MaskedMean()({{x}}, valid)  # mean over real tokens: {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), helpers=("MaskedMean",))
