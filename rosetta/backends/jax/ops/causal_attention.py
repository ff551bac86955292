"""causal_attention in JAX: ``jax.nn.dot_product_attention(..., is_causal=True)``, or attention's
composed steps under a lower-triangular mask (``Ctx.attention``; float64 always composes:
``lowering.attention_in_effect``). The ``*_kernel`` (IO) and ``*_bias`` tensors as is (the key
projection has no bias).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rosetta.backends.driver import Site
from rosetta.backends.jax.ops import param, weight
from rosetta.backends.jax.ops.attention import attention_composed
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.jax.lowering import Ctx, Layer, Params, Run

HELPERS = {
    "causal_self_attention": '''
def causal_self_attention(x, wq, bq, wk, wv, bv, wo, bo, heads, cache=None, layer="", offset=0):
    """Multi-head self-attention where position i reads positions 0..i only. Generating,
    ``cache`` (a dict) holds each layer's keys and values for the whole context, (N, context,
    heads, d), a static shape: this call's are written at ``offset`` and read with the earlier."""
    n, t, e = x.shape
    split = (n, t, heads, e // heads)  # (N, T, E) -> (B, T, N, H) as jax.nn wants it
    q, k, v = (x @ wq + bq).reshape(split), (x @ wk).reshape(split), (x @ wv + bv).reshape(split)
    if cache is None:  # every position at once: key j <= query i
        mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    else:
        k = lax.dynamic_update_slice(cache[layer][0], k, (0, offset, 0, 0))
        v = lax.dynamic_update_slice(cache[layer][1], v, (0, offset, 0, 0))
        cache[layer] = (k, v)
        # key j <= query offset + i; the slots past the last written one are masked
        mask = jnp.arange(k.shape[1])[None, :] <= offset + jnp.arange(t)[:, None]
    if x.dtype == jnp.float64:  # jax.nn's softmax runs in float32 whatever the inputs
        s = jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
        p = jax.nn.softmax(jnp.where(mask, s, jnp.finfo(s.dtype).min), axis=-1)
        o = jnp.einsum("bnts,bsnh->btnh", p, v)
    elif cache is None:
        o = jax.nn.dot_product_attention(q, k, v, is_causal=True)  # (N, T, heads, d)
    else:
        o = jax.nn.dot_product_attention(q, k, v, mask=mask[None, None])
    return o.reshape(n, t, e) @ wo + bo
''',
}


def build(op: ops.CausalAttention, site: Site, ctx: Ctx) -> Layer:
    import jax
    import jax.numpy as jnp
    from jax import lax

    e = site.in_shape[1]
    h, d = op.heads, e // op.heads

    def causal_attention_layer(p: Params, x: Any, run: Run) -> Any:
        n, t = x.shape[:2]

        def project(role: str, bias: bool) -> Any:
            y = ctx.dot(x, p[f"{op.name}.{role}_kernel"])
            y = y + p[f"{op.name}.{role}_bias"] if bias else y
            return y.reshape(n, t, h, d)  # (N, T, E) -> (B, T, N, H) as jax.nn wants it

        q, k, v = project("query", True), project("key", False), project("value", True)
        if run.decode is not None:  # generating: a static cache, written in place
            off = run.decode["offset"]
            ck, cv = run.decode["cache"][op.name]  # (N, context, heads, d)
            zero = jnp.zeros_like(off)  # every index of one integer type (x64 or not)
            ck = lax.dynamic_update_slice(ck, k, (zero, off, zero, zero))
            cv = lax.dynamic_update_slice(cv, v, (zero, off, zero, zero))
            run.decode["cache"][op.name] = (ck, cv)
            slots = jnp.arange(ck.shape[1])  # key j <= query position off + i
            mask = (slots[None, :] <= off + jnp.arange(t)[:, None])[None, None]  # (1, 1, t, C)
            if ctx.attention == "composed":
                o = attention_composed(q, ck, cv, mask, ctx)
            else:
                o = jax.nn.dot_product_attention(q, ck, cv, mask=mask)
        elif ctx.attention == "composed":
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))[None, None]  # (1, 1, T, T): j <= i
            o = attention_composed(q, k, v, mask, ctx)
        else:
            o = jax.nn.dot_product_attention(q, k, v, is_causal=True)  # (N, T, heads, d)
        o = o.reshape(n, t, e)  # heads concatenated
        return ctx.dot(o, p[f"{op.name}.output_kernel"]) + p[f"{op.name}.output_bias"]

    return causal_attention_layer


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    args = ", ".join(param(f"{op.name}.{r}") for r in ops.ATTENTION_ROLES)
    line = (
        f"{{x}} = causal_self_attention({{x}}, {args}, heads={op.heads}, cache=cache, "
        f"layer={q(op.name)}, offset=offset)  # {fmt_shape(site.out_shape)}"
    )
    weights = tuple(weight(f"{op.name}.{r}") for r in ops.ATTENTION_ROLES)
    return Snippet(forward=(line,), weights=weights, helpers=("causal_self_attention",))
