"""layer_norm in JAX: mean and biased variance over the last axis, ``lax.rsqrt`` with eps inside
the root. Gamma and beta as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "layer_norm": '''
def layer_norm(x, gamma, beta, eps):
    """LayerNorm over the last axis: biased variance, eps inside the root."""
    mean = x.mean(axis=-1, keepdims=True)
    var = jnp.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * gamma + beta
''',
}


def build(op: ops.LayerNorm, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp
    from jax import lax

    eps = np.asarray(op.eps, ctx.dtype)

    def layer_norm_layer(p: Params, x: Any, run: Run) -> Any:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)  # biased
        xhat = (x - mean) * lax.rsqrt(var + eps)
        return xhat * p[f"{op.name}.gamma"] + p[f"{op.name}.beta"]

    return layer_norm_layer


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(param(f"{op.name}.{r}") for r in ("gamma", "beta"))
    line = f"{{x}} = layer_norm({{x}}, {args}, {op.eps})"
    weights = tuple(weight(f"{op.name}.{r}") for r in ("gamma", "beta"))
    return Snippet(forward=(line,), weights=weights, helpers=("layer_norm",))
