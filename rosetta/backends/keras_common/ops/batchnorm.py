"""batchnorm in Keras: ``InferenceBatchNorm``, a ``BatchNormalization`` that always normalises
with its moving statistics (the spec's inference-mode BatchNorm); Keras' momentum is 1 - the
spec's. ``gamma, beta, mean, var`` are ``gamma, beta, moving_mean, moving_variance``, as stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Binding, identity
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, q
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.BatchNorm, site: Site, ctx: Ctx) -> Layer:
    from rosetta.backends.keras_common.lowering import InferenceBatchNorm

    if ctx.flattened_from is not None:
        raise BackendError(
            f"backend {ctx.backend!r}: batchnorm after an NHWC flatten is not lowered"
        )
    axis = -1 if ctx.data_format == "channels_last" or len(site.in_shape) == 1 else 1
    layer = InferenceBatchNorm(
        axis=axis,
        epsilon=op.eps,
        momentum=1.0 - op.momentum,
        dtype=ctx.dtype,
        name=ctx.layer_name(op.name),
    )
    ctx.bind(weights(op, layer, ctx))
    return layer


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    roles = (
        ("gamma", "gamma"),
        ("beta", "beta"),
        ("mean", "moving_mean"),
        ("var", "moving_variance"),
    )
    momentum = round(1.0 - op.momentum, 12)  # Keras' momentum is 1 - PyTorch's (the spec's)
    line = (
        f"{{x}} = layers.BatchNormalization(epsilon={op.eps}, momentum={momentum}, name={q(n)})"
        "({x})"
    )
    return Snippet(
        forward=(line,),
        weights=tuple(Weight(f"{op.name}.{c}", f"{get_layer(n)}.{k}") for c, k in roles),
    )


def weights(op: ops.BatchNorm, layer: layers.BatchNormalization, ctx: Ctx) -> Binding:
    names = tuple(f"{op.name}.{r}" for r in ("gamma", "beta", "mean", "var"))
    find = lambda: (layer.gamma, layer.beta, layer.moving_mean, layer.moving_variance)  # noqa: E731
    return Binding(names, find, identity, identity)
