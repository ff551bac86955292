"""clip in JAX: ``jax.nn.relu6`` for [0, 6], else ``jnp.clip``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.Clip, site: Site, ctx: Ctx) -> Layer:
    import jax
    import jax.numpy as jnp

    if (op.min, op.max) == (0.0, 6.0):
        return lambda p, x, run: jax.nn.relu6(x)
    lo, hi = op.min, op.max
    return lambda p, x, run: jnp.clip(x, lo, hi)


def render(op: ops.Clip, site: Site, ctx: RenderCtx) -> Snippet:
    if (op.min, op.max) == (0.0, 6.0):
        return Snippet(forward=("{x} = jax.nn.relu6({x})",))
    return Snippet(forward=(f"{{x}} = jnp.clip({{x}}, {op.min!r}, {op.max!r})",))
