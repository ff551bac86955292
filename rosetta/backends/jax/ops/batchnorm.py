"""batchnorm in JAX: the inference-mode affine ``(x - mean) / sqrt(var + eps) * gamma + beta``,
broadcast on the channel axis. Gamma, beta, mean and var as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "batchnorm": '''
def batchnorm(x, gamma, beta, mean, var, eps):
    """Inference-mode batch normalisation over the last (channel) axis."""
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
''',
}


def build(op: ops.BatchNorm, site: Site, ctx: Ctx) -> Layer:
    import jax.numpy as jnp

    n = op.name

    def batchnorm_layer(p: Params, x: Any, run: Run) -> Any:
        shape = [1] * x.ndim  # per-channel statistics broadcast on the channel axis
        shape[ctx.channel_axis if x.ndim == 4 else 1] = -1
        eps = jnp.asarray(op.eps, x.dtype)
        mean, var = p[f"{n}.mean"].reshape(shape), p[f"{n}.var"].reshape(shape)
        gamma, beta = p[f"{n}.gamma"].reshape(shape), p[f"{n}.beta"].reshape(shape)
        return (x - mean) / jnp.sqrt(var + eps) * gamma + beta  # inference mode

    return batchnorm_layer


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(param(f"{op.name}.{r}") for r in ("gamma", "beta", "mean", "var"))
    line = f"{{x}} = batchnorm({{x}}, {args}, {op.eps})"
    weights = tuple(weight(f"{op.name}.{r}") for r in ("gamma", "beta", "mean", "var"))
    return Snippet(forward=(line,), weights=weights, helpers=("batchnorm",))
