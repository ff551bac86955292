"""conv2d in Keras: ``layers.Conv2D``, ``padding="same"`` where Keras' "same" pads exactly the
spec's numbers, else an explicit ``ZeroPadding2D`` before a "valid" conv
(``lowering.keras_padding``); ``groups`` as Keras' own (its kernel's I is then the channels of
one group). The canonical OIHW kernel is Keras' HWIO (in both data formats); the bias is as
stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer, nhwc_shape, pair
from rosetta.backends.keras_common.weights import Arrays, Binding, kernel_and_bias
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Conv2D, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    from rosetta.backends.keras_common.lowering import after, keras_padding

    explicit, padding = keras_padding(op, site)
    layer = layers.Conv2D(
        op.out_channels,
        op.kernel,
        strides=op.stride,
        padding=padding,
        data_format=ctx.data_format,
        use_bias=op.bias,
        groups=op.groups,
        dtype=ctx.dtype,
        name=ctx.layer_name(op.name),
    )
    ctx.bind(weights(op, layer, ctx))
    if explicit is None:
        return layer
    t, b, left, right = explicit
    return after(
        layers.ZeroPadding2D(((t, b), (left, right)), ctx.data_format, dtype=ctx.dtype), layer
    )


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    t, b, left, right = op.padding
    kh, kw = op.kernel
    same = op.stride == (1, 1) and (t, b, left, right) == (
        (kh - 1) // 2,
        kh // 2,
        (kw - 1) // 2,
        kw // 2,
    )
    forward = []
    args = [str(op.out_channels), pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"strides={pair(op.stride)}")
    if same and (t, b, left, right) != (0, 0, 0, 0):
        args.append('padding="same"')
    elif (t, b, left, right) != (0, 0, 0, 0):
        forward.append(f"{{x}} = layers.ZeroPadding2D((({t}, {b}), ({left}, {right})))({{x}})")
    if not op.bias:
        args.append("use_bias=False")
    if op.groups != 1:
        args.append(f"groups={op.groups}")
    args.append(f"name={q(n)}")
    forward.append(
        f"{{x}} = layers.Conv2D({', '.join(args)})({{x}})  # {nhwc_shape(site.out_shape)}"
    )
    weights = [
        Weight(
            f"{op.name}.kernel",
            f"{get_layer(n)}.kernel",
            "oihw_to_hwio(a)",
            "hwio_to_oihw(a)",
            note="OIHW -> HWIO",
        )
    ]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"{get_layer(n)}.bias"))
    return Snippet(
        forward=tuple(forward),
        weights=tuple(weights),
        helpers=("oihw_to_hwio", "hwio_to_oihw"),
        notes=(f"{op.name}.kernel: OIHW -> HWIO (channels-last)",),
    )


def weights(op: ops.Conv2D, layer: layers.Conv2D, ctx: Ctx) -> Binding:
    return Binding(*kernel_and_bias(op, layer), oihw_to_hwio, hwio_to_oihw)


def oihw_to_hwio(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
    return (np.transpose(kernel, (2, 3, 1, 0)), *rest)  # (O, I, H, W) -> (H, W, I, O)


def hwio_to_oihw(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
    return (np.transpose(kernel, (3, 2, 0, 1)), *rest)  # (H, W, I, O) -> (O, I, H, W)
