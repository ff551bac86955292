"""dropout in JAX: ``jax.random.bernoulli`` with a key folded per site, switched on and off at
runtime by ``Run.dropout`` (an array argument of the one compiled program). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "dropout": '''
def dropout(x, rate, rng, i):
    """Inverted dropout with the i-th key folded from ``rng``; identity when ``rng`` is None."""
    if rng is None or rate == 0:
        return x
    keep = jax.random.bernoulli(jax.random.fold_in(rng, i), 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)
''',
}


def build(op: ops.Dropout, site: Site, ctx: Ctx) -> Layer:
    import jax
    import jax.numpy as jnp

    index = next(ctx.sites)
    keep = 1.0 - op.rate

    def dropout_layer(p: Params, x: Any, run: Run) -> Any:
        if not run.training or op.rate == 0:
            return x
        one = jnp.ones((), x.dtype)
        mask = jax.random.bernoulli(jax.random.fold_in(run.key, index), keep, x.shape)
        mask = mask | ~run.dropout  # dropout off: every unit kept ...
        scale = jnp.where(run.dropout, jnp.asarray(keep, x.dtype), one)  # ... and x / 1 == x
        return jnp.where(mask, x / scale, jnp.zeros((), x.dtype))

    return dropout_layer


def render(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    i = ctx.extra.get("dropouts", 0)
    ctx.extra["dropouts"] = i + 1
    line = f"{{x}} = dropout({{x}}, {op.rate}, rng, {i})  # rng None: evaluation, identity"
    return Snippet(forward=(line,), helpers=("dropout",))
