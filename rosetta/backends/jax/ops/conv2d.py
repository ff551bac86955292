"""conv2d in JAX: ``lax.conv_general_dilated`` with explicit dimension numbers (NHWC x HWIO, or
NCHW x OIHW) and explicit asymmetric padding; on the CPU in NHWC its kernel gradient is one GEMM
per kernel tap (:func:`with_gemm_weight_grad`). The canonical ``OIHW`` kernel becomes ``HWIO``
when images run NHWC (unchanged in NCHW); the bias is kept as is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import Rule, nhwc_shape, pads, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops
from rosetta.spec.ops import Shape

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "conv2d": '''
def conv2d(x, kernel, bias, stride, padding):
    """Cross-correlation of NHWC ``x`` with an HWIO ``kernel``, explicit zero padding."""
    y = lax.conv_general_dilated(x, kernel, stride, padding, dimension_numbers=NHWC)
    return y if bias is None else y + bias
''',
    "grouped_conv2d": '''
def grouped_conv2d(x, kernel, bias, stride, padding, groups):
    """``conv2d`` in ``groups`` groups (depthwise where it equals the channels): the HWIO
    ``kernel``'s I is the channels / groups each output reads."""
    y = lax.conv_general_dilated(x, kernel, stride, padding, dimension_numbers=NHWC,
                                 feature_group_count=groups)
    return y if bias is None else y + bias
''',
}


def build(op: ops.Conv2D, site: Site, ctx: Ctx) -> Layer:
    from jax import lax

    kernel_layout = "HWIO" if ctx.layout == "NHWC" else "OIHW"
    dims = (ctx.layout, kernel_layout, ctx.layout)
    top, bottom, left, right = op.padding
    shape = [1, 1, 1, 1]
    shape[ctx.channel_axis] = op.out_channels

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(
            x,
            w,
            window_strides=op.stride,
            padding=((top, bottom), (left, right)),
            dimension_numbers=dims,
            feature_group_count=op.groups,
            precision=ctx.precision,
        )

    if ctx.use_gemm_weight_grad(op):
        conv = with_gemm_weight_grad(conv, op, ctx)

    def conv2d_layer(p: Params, x: Any, run: Run) -> Any:
        y = conv(x, p[f"{op.name}.kernel"])
        return y + p[f"{op.name}.bias"].reshape(shape) if op.bias else y

    return conv2d_layer


def with_gemm_weight_grad(conv: Callable, op: ops.Conv2D, ctx: Ctx) -> Callable:
    """``conv`` (NHWC x HWIO) whose kernel gradient is one GEMM per kernel tap.

    XLA:CPU lowers the kernel gradient of a convolution to another convolution whose "kernel" is
    the whole output gradient (32 x 32 for the CNN's conv2) and runs it 4-6x slower per FLOP
    than the forward convolution (measured; PyTorch's oneDNN does it at forward speed). Written
    as ``dW[i, j] = x_shifted(i, j)^T @ dy`` over the (N*Ho*Wo) rows it is plain GEMMs. The input
    gradient stays XLA's (as fast as its forward). Whole CNN step: XLA's kernel gradient took
    1.19x [1.14, 1.27] as long (9 interleaved rounds; 0.92-1.56 in noisier runs)."""
    import jax
    import jax.numpy as jnp

    kh, kw = op.kernel
    sh, sw = op.stride
    top, bottom, left, right = op.padding

    @jax.custom_vjp
    def conv_gemm(x: Any, w: Any) -> Any:
        return conv(x, w)

    def fwd(x: Any, w: Any) -> tuple[Any, tuple[Any, Any]]:
        return conv(x, w), (x, w)

    def bwd(res: tuple[Any, Any], dy: Any) -> tuple[Any, Any]:
        x, w = res
        (dx,) = jax.vjp(lambda x_: conv(x_, w), x)[1](dy)
        _, ho, wo, o = dy.shape
        c = x.shape[3]
        xp = jnp.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))  # (N, Hp, Wp, C)
        dyt = dy.reshape(-1, o).T  # (N, Ho, Wo, O) -> (N*Ho*Wo, O) -> (O, N*Ho*Wo)
        taps = []
        for i in range(kh):
            for j in range(kw):
                # input pixels under tap (i, j) of every output: (N, Ho, Wo, C) -> (N*Ho*Wo, C)
                xs = xp[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                taps.append(ctx.dot(dyt, xs.reshape(-1, c)).T)  # (O, C) -> (C, O)
        return dx, jnp.stack(taps).reshape(kh, kw, c, o)  # (KH*KW, C, O) -> HWIO

    conv_gemm.defvjp(fwd, bwd)
    return conv_gemm


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    bias = param(f"{op.name}.bias") if op.bias else "None"
    call, groups = ("conv2d", "") if op.groups == 1 else ("grouped_conv2d", f", {op.groups}")
    line = (
        f"{{x}} = {call}({{x}}, {param(f'{op.name}.kernel')}, {bias}, {op.stride}, "
        f"{pads(op.padding)}{groups})  # {nhwc_shape(site.out_shape)}"
    )
    weights = [
        weight(
            f"{op.name}.kernel",
            to_native="oihw_to_hwio(a)",
            to_canonical="hwio_to_oihw(a)",
            note="OIHW -> HWIO",
        )
    ]
    if op.bias:
        weights.append(weight(f"{op.name}.bias"))
    return Snippet(
        forward=(line,),
        weights=tuple(weights),
        helpers=(call, "oihw_to_hwio", "hwio_to_oihw"),
        notes=(f"{op.name}.kernel: OIHW -> HWIO (channels-last)",),
    )


def oihw_to_hwio(w: np.ndarray) -> np.ndarray:
    return w.transpose(2, 3, 1, 0)  # (O, I, KH, KW) -> (KH, KW, I, O)


def hwio_to_oihw(w: np.ndarray) -> np.ndarray:
    return w.transpose(3, 2, 0, 1)  # (KH, KW, I, O) -> (O, I, KH, KW)


def param_layout(op: ops.Conv2D, layout: str, prev: tuple[object, Shape] | None) -> dict[str, Rule]:
    """The kernel ``OIHW`` -> ``HWIO`` when images run NHWC; nothing to convert in NCHW."""
    if layout != "NHWC":
        return {}
    return {f"{op.name}.kernel": (oihw_to_hwio, hwio_to_oihw, "OIHW->HWIO")}
