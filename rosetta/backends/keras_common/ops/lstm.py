"""lstm in Keras: ``layers.LSTM`` in the cuDNN-eligible configuration (tanh, sigmoid, bias, no
unroll), the last step. Its ``kernel (E, 4H)``, ``recurrent_kernel (H, 4H)`` and one ``bias``
(4H,) are the spec's own, gate order i | f | c | o (the spec's i | f | g | o): no conversion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Arrays, Binding
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.LSTM, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    # the cuDNN-eligible configuration: tanh, sigmoid, bias, no unroll
    layer = layers.LSTM(
        op.units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        unroll=False,
        return_sequences=False,
        dtype=ctx.dtype,
        name=ctx.layer_name(op.name),
    )
    ctx.bind(weights(op, layer, ctx))
    return layer  # (N, T, E) -> (N, H), the last step


def render(op: ops.LSTM, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    cell = f"{get_layer(n)}.cell"
    line = (
        f"{{x}} = layers.LSTM({op.units}, name={q(n)})({{x}})"
        f"  # {fmt_shape(site.out_shape)}, the last step"
    )
    return Snippet(
        forward=(line,),
        weights=(
            Weight(f"{op.name}.kernel", f"{cell}.kernel", note="(E, 4H) i|f|c|o, as the spec"),
            Weight(f"{op.name}.recurrent_kernel", f"{cell}.recurrent_kernel"),
            Weight(f"{op.name}.bias", f"{cell}.bias"),
        ),
    )


def weights(op: ops.LSTM, layer: layers.LSTM, ctx: Ctx) -> Binding:
    names = tuple(f"{op.name}.{r}" for r in ("kernel", "recurrent_kernel", "bias"))
    find = lambda: (layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)  # noqa: E731
    return Binding(names, find, as_is, as_is)


def as_is(*arrays) -> Arrays:
    """Keras' LSTM weights are the spec's, one to one."""
    return arrays
