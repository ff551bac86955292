"""sigmoid in JAX: ``jax.nn.sigmoid`` (exact: ``lax.logistic``, stable at both tails). No
parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer


def build(op: ops.Sigmoid, site: Site, ctx: Ctx) -> Layer:
    import jax

    return lambda p, x, run: jax.nn.sigmoid(x)


def render(op: ops.Sigmoid, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = jax.nn.sigmoid({x})",))
