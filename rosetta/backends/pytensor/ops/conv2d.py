"""conv2d in PyTensor, which has no CNN convolution op (PyTensor 3 dropped Theano's ``conv2d``
and its ``CorrMM`` kernels): explicit zero padding (``set_subtensor`` into zeros), the KH*KW
strided slices of the padded input (one per kernel tap) concatenated on the channel axis, and
*one* ``dot`` with the HWIO kernel seen as a (KH*KW*C, O) matrix (im2col, as Caffe and Chainer
do); channels-last makes both the concatenation and the reshape free of transposes.

Weights: the canonical ``OIHW`` kernel -> ``HWIO`` (the matrix's rows are then in tap-major,
channel-minor order, the order the taps are concatenated in); the bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, out_hw, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape, nhwc
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "conv2d": '''
def conv2d(x, n, kernel, bias, stride, padding, out_hw):
    """Cross-correlation of NHWC ``x`` (batch size ``n``) with an HWIO ``kernel``: the taps side
    by side on the channel axis and one matrix product (N*Ho*Wo, KH*KW*C) @ (KH*KW*C, O)."""
    kh, kw, c, o = kernel.get_value().shape
    cols = taps(pad(x, n, padding, 0.0), (kh, kw), stride, out_hw)
    cols = cols[0] if len(cols) == 1 else pt.concatenate(cols, axis=3)
    y = pt.dot(cols.reshape((n * out_hw[0] * out_hw[1], kh * kw * c)),
               kernel.reshape((kh * kw * c, o)))
    y = y.reshape((n, out_hw[0], out_hw[1], o))
    return y if bias is None else y + bias
''',
    "grouped_conv2d": '''
def grouped_conv2d(x, n, kernel, bias, stride, padding, out_hw, groups):
    """``conv2d`` in ``groups`` groups (depthwise where it equals the channels): one batched
    matrix product, a group a batch, (G, N*Ho*Wo, KH*KW*C/G) @ (G, KH*KW*C/G, O/G)."""
    kh, kw, cg, o = kernel.get_value().shape
    m, kk, og = n * out_hw[0] * out_hw[1], kh * kw, o // groups
    cols = taps(pad(x, n, padding, 0.0), (kh, kw), stride, out_hw)
    cols = cols[0] if len(cols) == 1 else pt.concatenate(cols, axis=3)
    cols = cols.reshape((m, kk, groups, cg)).dimshuffle(2, 0, 1, 3).reshape((groups, m, kk * cg))
    w = kernel.reshape((kk * cg, groups, og)).dimshuffle(1, 0, 2)
    y = pt.matmul(cols, w).dimshuffle(1, 0, 2).reshape((n, out_hw[0], out_hw[1], o))
    return y if bias is None else y + bias
''',
}


def build(op: ops.Conv2D, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    from rosetta.backends.pytensor.lowering import batch_size, padded, tap_slices

    c, (kh, kw), o, g = site.in_shape[0] // op.groups, op.kernel, op.out_channels, op.groups
    _, ho, wo = site.out_shape
    kernel = ctx.shared(f"{op.name}.kernel", (kh, kw, c, o))  # HWIO (I: one group's channels)
    bias = ctx.shared(f"{op.name}.bias", (o,)) if op.bias else None

    def conv2d_layer(x: Any, run: Run) -> Any:
        taps = tap_slices(
            padded(x, run, site, op.padding, ctx.const(0.0)), site, op.kernel, op.stride
        )
        patches = taps[0] if len(taps) == 1 else pt.concatenate(taps, axis=3)
        n = batch_size(x, run)
        if g == 1:
            # (N, Ho, Wo, KH*KW*C) -> (N*Ho*Wo, KH*KW*C) @ (KH*KW*C, O) -> (N, Ho, Wo, O)
            y = pt.dot(
                patches.reshape((n * ho * wo, kh * kw * c)), kernel.reshape((kh * kw * c, o))
            )
        else:  # a group a batch: (N, Ho, Wo, KH*KW*G*C/G) -> (G, N*Ho*Wo, KH*KW*C/G)
            cols = patches.reshape((n * ho * wo, kh * kw, g, c)).dimshuffle(2, 0, 1, 3)
            cols = cols.reshape((g, n * ho * wo, kh * kw * c))
            w = kernel.reshape((kh * kw * c, g, o // g)).dimshuffle(1, 0, 2)  # (G, KH*KW*C/G, O/G)
            y = pt.matmul(cols, w).dimshuffle(1, 0, 2)  # (G, M, O/G) -> (M, G, O/G)
        y = y.reshape((n, ho, wo, o))
        return y if bias is None else y + bias

    return conv2d_layer


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    kernel, bias = param(f"{op.name}.kernel"), param(f"{op.name}.bias") if op.bias else "None"
    call, groups = ("conv2d", "") if op.groups == 1 else ("grouped_conv2d", f", {op.groups}")
    line = (
        f"{{x}} = {call}({{x}}, n, {kernel}, {bias}, {op.stride}, {op.padding}, "
        f"{out_hw(site)}{groups})  # {fmt_shape(nhwc(site.out_shape))}"
    )
    weights = [
        weight(
            f"{op.name}.kernel",
            to_native="oihw_to_hwio(a)",
            to_canonical="hwio_to_oihw(a)",
            note="OIHW -> HWIO",
        )  # fmt: skip
    ]
    if op.bias:
        weights.append(weight(f"{op.name}.bias"))
    return Snippet(
        forward=(line,),
        weights=tuple(weights),
        helpers=("pad", "taps", call, "oihw_to_hwio", "hwio_to_oihw"),
        notes=(f"{op.name}.kernel: OIHW -> HWIO (channels-last)",),
    )


def oihw_to_hwio(w: np.ndarray) -> np.ndarray:
    """Conv kernel (O, I, KH, KW) -> (KH, KW, I, O)."""
    return w.transpose(2, 3, 1, 0)


def hwio_to_oihw(w: np.ndarray) -> np.ndarray:
    """Conv kernel (KH, KW, I, O) -> (O, I, KH, KW)."""
    return w.transpose(3, 2, 0, 1)


def layout(op: ops.Conv2D, prev: Prev) -> dict[str, Layout]:
    """The kernel OIHW -> HWIO; the bias as is."""
    return {f"{op.name}.kernel": Layout(oihw_to_hwio, hwio_to_oihw, "OIHW->HWIO")}
