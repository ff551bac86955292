"""gru in Keras: ``layers.GRU(reset_after=True)`` in the cuDNN-eligible configuration (tanh,
sigmoid, bias, no unroll), the last step. Its ``kernel (E, 3H)`` and ``recurrent_kernel (H, 3H)``
already have the spec's gate order z | r | h; its ``bias`` is (2, 3H), row 0 the input bias and
row 1 the recurrent one (``gru_to_keras``). A backend may supply its engine's own GRU
(``Ctx.native["gru"]``: keras_torch's ``nn.GRU`` in ``TorchModuleWrapper``, its option ``gru``),
which then builds the layer and its binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Arrays, Binding
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.errors import BackendError
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.GRU, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    if (op.gate_order, op.reset_after) != (("z", "r", "h"), True):
        raise BackendError(f"backend {ctx.backend!r}: GRU must be z, r, h with reset_after=True")
    if (op.initial_state, op.output) != ("zeros", "last"):
        raise BackendError(
            f"backend {ctx.backend!r}: GRU must start at zeros and return the last step"
        )
    native = ctx.native.get("gru")
    if native is not None:  # the engine's own fused GRU (keras_torch: nn.GRU), its binding
        return native(op, site, ctx)
    # the cuDNN-eligible configuration: tanh, sigmoid, reset_after, bias, no unroll
    layer = layers.GRU(
        op.units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        reset_after=True,
        unroll=False,
        return_sequences=False,
        dtype=ctx.dtype,
        name=ctx.layer_name(op.name),
    )
    ctx.bind(weights(op, layer, ctx))
    return layer  # (N, T, E) -> (N, H), the last step


def render(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    cell = f"{get_layer(n)}.cell"
    line = (
        f"{{x}} = layers.GRU({op.units}, reset_after=True, name={q(n)})({{x}})"
        f"  # {fmt_shape(site.out_shape)}, the last step"
    )
    return Snippet(
        forward=(line,),
        weights=(
            Weight(f"{op.name}.kernel", f"{cell}.kernel", note="(E, 3H) z|r|h, as the spec"),
            Weight(f"{op.name}.recurrent_kernel", f"{cell}.recurrent_kernel"),
            Weight(f"{op.name}.bias_input", f"{cell}.bias", native_part="0", note="bias[0]"),
            Weight(f"{op.name}.bias_recurrent", f"{cell}.bias", native_part="1", note="bias[1]"),
        ),
        notes=("GRU: the two biases are rows 0 (input) and 1 (recurrent) of Keras' bias (2, 3H)",),
    )


def weights(op: ops.GRU, layer: layers.GRU, ctx: Ctx) -> Binding:
    names = tuple(
        f"{op.name}.{r}" for r in ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    )
    find = lambda: (layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)  # noqa: E731
    return Binding(names, find, gru_to_keras, gru_from_keras)


def gru_to_keras(kernel, recurrent_kernel, bias_input, bias_recurrent) -> Arrays:
    return kernel, recurrent_kernel, np.stack([bias_input, bias_recurrent])  # 2 x (3H,) -> (2, 3H)


def gru_from_keras(kernel, recurrent_kernel, bias) -> Arrays:
    return kernel, recurrent_kernel, bias[0], bias[1]  # (2, 3H) -> 2 x (3H,)
