"""tied_dense in JAX: ``x @ table.T`` with the embedding's own ``<tie>.table`` from the one flat
parameter dict (a tie is two reads of one leaf: ``jax.grad`` adds both uses' gradients); the op
owns no parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run


def build(op: ops.TiedDense, site: Site, ctx: Ctx) -> Layer:
    def tied_dense_layer(p: Params, x: Any, run: Run) -> Any:
        return ctx.dot(x, p[f"{op.tie}.table"].T)  # (..., E) @ (E, V) -> (..., V)

    return tied_dense_layer


def render(op: ops.TiedDense, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = {{x}} @ {param(f'{op.tie}.table')}.T  # tied  {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,))
