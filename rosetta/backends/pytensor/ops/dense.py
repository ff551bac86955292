"""dense in PyTensor: ``pt.dot`` with the IO kernel (a time-major (T, N, I) input: tensordot).

Weights: the kernel is IO as the spec's, except right after a flatten of (C, H, W): its rows are
in the spec's channel-major C, H, W order and an NHWC flatten yields H, W, C, so they are
permuted here once (``rows_chw_to_hwc``); the bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.binding import rows_chw_to_hwc
from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run


def build(op: ops.Dense, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    kernel = ctx.shared(f"{op.name}.kernel", (site.in_shape[-1], op.units))  # IO
    bias = ctx.shared(f"{op.name}.bias", (op.units,)) if op.bias else None

    def dense_layer(x: Any, run: Run) -> Any:
        y = pt.dot(x, kernel)  # (N, I) @ (I, O) -> (N, O); (T, N, I): tensordot
        return y if bias is None else y + bias

    return dense_layer


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f" + {param(f'{op.name}.bias')}" if op.bias else ""
    line = (
        f"{{x}} = pt.dot({{x}}, {param(f'{op.name}.kernel')}){bias}  # {fmt_shape(site.out_shape)}"
    )
    kernel = weight(f"{op.name}.kernel", note="IO, as stored")
    helpers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if ctx.pending_flatten is not None:
        chw, ctx.pending_flatten = ctx.pending_flatten, None
        kernel = weight(
            f"{op.name}.kernel",
            to_native=f"chw_rows_to_hwc(a, {chw})",
            to_canonical=f"hwc_rows_to_chw(a, {chw})",
            note="rows C, H, W -> H, W, C (the flatten permutation)",
        )
        helpers = ("chw_rows_to_hwc", "hwc_rows_to_chw")
        notes = (f"{op.name}.kernel: rows permuted from C, H, W to H, W, C",)
    weights = [kernel] + ([weight(f"{op.name}.bias")] if op.bias else [])
    return Snippet(forward=(line,), weights=tuple(weights), helpers=helpers, notes=notes)


def layout(op: ops.Dense, prev: Prev) -> dict[str, Layout]:
    """The kernel's rows permuted C, H, W -> H, W, C right after a flatten of (C, H, W), else
    as is; the bias as is."""
    if prev is not None:
        prev_node, prev_in = prev
        if isinstance(prev_node, ops.Flatten) and len(prev_in) == 3:
            to_native, to_canonical = rows_chw_to_hwc(prev_in)
            return {
                f"{op.name}.kernel": Layout(to_native, to_canonical, "rows CHW->HWC (NHWC flatten)")
            }
    return {}
