"""dense in Keras: ``layers.Dense``; the canonical IO kernel is Keras' own layout, except after a
flatten of NHWC activations: those rows come in H, W, C order, the spec's in C, H, W
(``Flatten(order="CHW")``), so the kernel rows are permuted (``chw_rows_to_hwc``). The bias is
as stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.binding import rows_chw_to_hwc
from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import get_layer
from rosetta.backends.keras_common.weights import Arrays, Binding, identity, kernel_and_bias
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from keras import layers

    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.Dense, site: Site, ctx: Ctx) -> Layer:
    from keras import layers

    layer = layers.Dense(op.units, use_bias=op.bias, dtype=ctx.dtype, name=ctx.layer_name(op.name))
    ctx.bind(weights(op, layer, ctx))
    ctx.flattened_from = None  # the flatten's permutation is this kernel's
    return layer


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    bias = "" if op.bias else ", use_bias=False"
    kernel = Weight(f"{op.name}.kernel", f"{get_layer(n)}.kernel", note="IO, as stored")
    helpers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if ctx.pending_flatten is not None:
        chw, ctx.pending_flatten = ctx.pending_flatten, None
        kernel = Weight(
            kernel.canonical,
            kernel.native,
            f"chw_rows_to_hwc(a, {chw})",
            f"hwc_rows_to_chw(a, {chw})",
            note="rows C, H, W -> H, W, C (the flatten permutation)",
        )
        helpers = ("chw_rows_to_hwc", "hwc_rows_to_chw")
        notes = (f"{op.name}.kernel: rows permuted from C, H, W to H, W, C",)
    weights = [kernel]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"{get_layer(n)}.bias"))
    line = (
        f"{{x}} = layers.Dense({op.units}{bias}, name={q(n)})({{x}})  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,), weights=tuple(weights), helpers=helpers, notes=notes)


def weights(op: ops.Dense, layer: layers.Dense, ctx: Ctx) -> Binding:
    """Kernel (+ bias); the kernel rows permuted when a flatten of NHWC activations is pending
    (``ctx.flattened_from``, which ``build`` then clears)."""
    chw = ctx.flattened_from
    if chw is not None:
        convert = chw_rows_to_hwc(chw), hwc_rows_to_chw(chw)
    else:
        convert = identity, identity
    return Binding(*kernel_and_bias(op, layer), *convert)


def chw_rows_to_hwc(chw: tuple[int, int, int]) -> Callable[..., Arrays]:
    """Dense kernel rows from the spec's ``C, H, W`` flatten order to NHWC's ``H, W, C``."""
    to_native, _ = rows_chw_to_hwc(chw)

    def convert(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
        return (to_native(kernel), *rest)

    return convert


def hwc_rows_to_chw(chw: tuple[int, int, int]) -> Callable[..., Arrays]:
    """The inverse of ``chw_rows_to_hwc``."""
    _, to_canonical = rows_chw_to_hwc(chw)

    def convert(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
        return (to_canonical(kernel), *rest)

    return convert
