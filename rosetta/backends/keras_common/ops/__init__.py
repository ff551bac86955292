"""The ops of the spec in Keras: one module per op, found by its name
(``rosetta.backends.driver.discover``), shared by the three Keras engines (``tensorflow``,
``keras_jax``, ``keras_torch``: Keras 3 runs the same layers on each). Each holds ``build`` (the
Keras layer(s); imports keras itself), ``render`` (the same layer as a line of the functional
API) and, for an op with parameters, ``weights(op, layer, ctx)``: the :class:`Binding` of its
canonical tensors to the built layer's variables with the layout conversion both ways, which
``build`` hands to ``ctx.bind`` (Keras' variables exist once the layer is built, so a binding
finds them when it is used). The one op whose layer differs by engine, GELU, branches on the
backend's name (``Ctx.backend``, ``RenderCtx.backend``). This package imports no framework.

The generated file is channels-last (NHWC, Keras' default): conv kernels OIHW -> HWIO, a dense
layer after a flatten of NHWC activations has its kernel rows permuted from the spec's C, H, W
to H, W, C, and the GRU's two biases are Keras' one ``bias`` of shape (2, 3H).
"""

from __future__ import annotations

from rosetta.backends.snippet import fmt_shape, nhwc, q

#: op name -> why this backend does not lower it (every op of the spec is lowered)
UNSUPPORTED: dict[str, str] = {}


def pair(p: tuple[int, int]) -> str:
    """A kernel or stride as Keras writes it: ``3`` for (3, 3), else ``(3, 2)``."""
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def nhwc_shape(site_shape: tuple[int, ...]) -> str:
    """A canonical per-sample shape as the channels-last file holds it, for a shape comment."""
    return fmt_shape(nhwc(site_shape))


def get_layer(n: str) -> str:
    """The generated model's layer named ``n``."""
    return f"model.get_layer({q(n)})"
