"""attention in JAX: ``jax.nn.dot_product_attention`` with a boolean key mask, or the same steps
composed in the inputs' dtype (``Ctx.attention``; float64 always composes:
``lowering.attention_in_effect``); a row of padding only gives 0. The ``*_kernel`` (IO) and
``*_bias`` tensors as is (the key projection has no bias).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "self_attention": '''
def self_attention(x, valid, wq, bq, wk, wv, bv, wo, bo, heads):
    """Multi-head self-attention; keys where ``valid`` is False (padding) take no part; a
    row of padding only attends to nothing (0)."""
    n, t, e = x.shape
    split = (n, t, heads, e // heads)  # (N, T, E) -> (B, T, N, H) as jax.nn wants it
    q, k, v = (x @ wq + bq).reshape(split), (x @ wk).reshape(split), (x @ wv + bv).reshape(split)
    mask = valid[:, None, None, :]  # (N, 1, 1, T): keys that take part
    if x.dtype == jnp.float64:  # jax.nn's softmax runs in float32 whatever the inputs
        s = jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
        p = jax.nn.softmax(jnp.where(mask, s, jnp.finfo(s.dtype).min), axis=-1)
        o = jnp.einsum("bnts,bsnh->btnh", p, v)
    else:
        o = jax.nn.dot_product_attention(q, k, v, mask=mask)  # (N, T, heads, d)
    o = jnp.where(valid.any(axis=1)[:, None, None, None], o, 0)
    return o.reshape(n, t, e) @ wo + bo
''',
}


def build(op: ops.Attention, site: Site, ctx: Ctx) -> Layer:
    import jax
    import jax.numpy as jnp

    t, e = site.in_shape
    h, d = op.heads, e // op.heads

    def attention_layer(p: Params, x: Any, run: Run) -> Any:
        n = x.shape[0]

        def project(role: str, bias: bool) -> Any:
            y = ctx.dot(x, p[f"{op.name}.{role}_kernel"])
            y = y + p[f"{op.name}.{role}_bias"] if bias else y
            return y.reshape(n, t, h, d)  # (N, T, E) -> (B, T, N, H) as jax.nn wants it

        q, k, v = project("query", True), project("key", False), project("value", True)
        mask = run.valid[:, None, None, :]  # (N, 1, 1, T): keys that take part
        if ctx.attention == "composed":
            o = attention_composed(q, k, v, mask, ctx)
        else:
            o = jax.nn.dot_product_attention(q, k, v, mask=mask)  # (N, T, heads, d)
        # a row without a valid key: jax.nn gives the mean of v (uniform weights); the spec 0
        any_key = jnp.any(run.valid, axis=1)[:, None, None, None]
        o = jnp.where(any_key, o, jnp.zeros((), o.dtype)).reshape(n, t, e)
        return ctx.dot(o, p[f"{op.name}.output_kernel"]) + p[f"{op.name}.output_bias"]

    return attention_layer


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    args = ", ".join(param(f"{op.name}.{r}") for r in ops.ATTENTION_ROLES)
    line = (
        f"{{x}} = self_attention({{x}}, valid, {args}, heads={op.heads})"
        f"  # {fmt_shape(site.out_shape)}"
    )
    weights = tuple(weight(f"{op.name}.{r}") for r in ops.ATTENTION_ROLES)
    return Snippet(forward=(line,), weights=weights, helpers=("self_attention",))


def attention_composed(q: Any, k: Any, v: Any, mask: Any, ctx: Ctx) -> Any:
    """``jax.nn.dot_product_attention``'s steps written out in the inputs' dtype: ``einsum``
    scores scaled by ``1 / sqrt(d)``, padding keys at the dtype's lowest value, ``softmax``,
    ``einsum`` with ``v`` (layout (N, T, heads, d) in and out). What float64 runs, and the
    ``composed`` form of the others."""
    import jax
    import jax.numpy as jnp

    scale = np.asarray(1 / np.sqrt(q.shape[-1]), q.dtype)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, precision=ctx.precision) * scale
    logits = jnp.where(mask, logits, jnp.finfo(q.dtype).min)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bnts,bsnh->btnh", probs, v, precision=ctx.precision)
