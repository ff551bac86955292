"""dense in JAX: ``jnp.dot`` of ``(N, I)`` by the canonical ``(I, O)`` kernel, at the runtime's
precision. The kernel keeps the spec's layout except right after a flatten of ``(C, H, W)``
in NHWC: its rows are in the spec's channel-major ``C, H, W`` order while an NHWC flatten
yields ``H, W, C``, so they are permuted once at ``set_params`` and the forward pass never
transposes activations. The bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.binding import rows_chw_to_hwc
from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import Rule, param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops
from rosetta.spec.ops import Shape

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run


def build(op: ops.Dense, site: Site, ctx: Ctx) -> Layer:
    def dense_layer(p: Params, x: Any, run: Run) -> Any:
        y = ctx.dot(x, p[f"{op.name}.kernel"])  # (N, I) @ (I, O) -> (N, O)
        return y + p[f"{op.name}.bias"] if op.bias else y

    return dense_layer


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f" + {param(f'{op.name}.bias')}" if op.bias else ""
    line = f"{{x}} = {{x}} @ {param(f'{op.name}.kernel')}{bias}  # {fmt_shape(site.out_shape)}"
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


def param_layout(op: ops.Dense, layout: str, prev: tuple[object, Shape] | None) -> dict[str, Rule]:
    """The kernel's rows ``C, H, W`` -> ``H, W, C`` right after a flatten of ``(C, H, W)`` in
    NHWC (``prev``: the op walked before this one and its input shape); else nothing."""
    if layout != "NHWC" or prev is None:
        return {}
    prev_node, prev_in = prev
    if isinstance(prev_node, ops.Flatten) and len(prev_in) == 3:
        to_native, to_canonical = rows_chw_to_hwc(prev_in)
        return {f"{op.name}.kernel": (to_native, to_canonical, "rows CHW->HWC (NHWC flatten)")}
    return {}
