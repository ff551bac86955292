"""relu in JAX: ``jnp.where(x > 0, x, 0)`` (gradient 0 at exactly 0, as the reference). No
parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.ReLU, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp

    # where(x > 0, x, 0), not maximum(x, 0): XLA's max sends half the gradient to each side of a
    # tie, so maximum's gradient at exactly 0 is 0.5; the reference (and every other backend)
    # gives 0 there, which an all-black image makes visible (tests/test_backend_jax.py)
    return lambda p, x, run: jnp.where(x > 0, x, jnp.zeros((), x.dtype))


def render(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = jax.nn.relu({x})",))
