"""gelu in JAX: ``jax.nn.gelu(approximate=False)``, the exact (erf) form. No parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.GELU, site: Site, ctx: Ctx) -> Layer:
    import jax

    return lambda p, x, run: jax.nn.gelu(x, approximate=False)  # exact erf


def render(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = jax.nn.gelu({x}, approximate=False)  # exact (erf)",))
