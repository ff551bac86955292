"""gelu in Keras: exact (erf) GELU. On JAX and PyTorch, Keras' ``gelu`` (approximate=False: the
engine's exact kernel, ``jax.nn.gelu``, ``F.gelu``); on TensorFlow, Keras' gelu is
``tf.nn.gelu``, whose ``sqrt 2`` is cast from a float32 tensor (5e-9 off in float64), so there
the formula is written out with ``sqrt 2`` in the input's dtype (``ExactGELU``). Both faces
branch on the backend's name. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer

#: the backend whose Keras gelu rounds ``sqrt 2`` through float32
ROUNDS_SQRT2 = "tensorflow"

EXACT_GELU = '''
class ExactGELU(layers.Layer):
    """0.5 x (1 + erf(x / sqrt 2)), sqrt 2 in x's dtype (tf.nn.gelu casts it from float32)."""

    def call(self, x):
        return 0.5 * x * (1.0 + keras.ops.erf(x / 2.0**0.5))
'''
HELPERS = {"ExactGELU": EXACT_GELU}


def build(op: ops.GELU, site: Site, ctx: Ctx) -> Layer:
    """Exact GELU: Keras' ``gelu`` (approximate=False: ``F.gelu``, ``jax.nn.gelu``), except on
    TensorFlow, where it rounds ``sqrt 2`` through float32 (:class:`ExactGELU`)."""
    from keras import layers

    from rosetta.backends.keras_common.lowering import ExactGELU

    if ctx.backend == ROUNDS_SQRT2:
        return ExactGELU(dtype=ctx.dtype)
    return layers.Activation("gelu", dtype=ctx.dtype)  # keras.activations.gelu: erf form


def render(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    if ctx.backend == ROUNDS_SQRT2:  # Keras' gelu there is tf.nn.gelu: sqrt 2 in float32
        line = "{x} = ExactGELU()({x})  # Keras' gelu on TensorFlow rounds sqrt 2 to float32"
        return Snippet(forward=(line,), helpers=("ExactGELU",))
    return Snippet(forward=('{x} = layers.Activation("gelu")({x})  # exact (erf) GELU',))
