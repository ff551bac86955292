"""causal_attention in PyTorch: ``CausalSelfAttention`` (SDPA with ``is_causal=True``, or
composed: ``Build.attention``); its projections and their bindings are attention's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.backends.torch.ops import attention
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


CAUSAL_SELF_ATTENTION = '''
def causal_self_attention(x, query, key, value, output, heads, cache=None, layer=""):
    """Multi-head self-attention where position i reads positions 0..i only. Generating,
    ``cache`` (a dict) keeps each layer's keys and values of the positions seen so far: the
    prompt's positions fill it, then each new token reads them and adds its own."""
    n, t, e = x.shape
    q, k, v = (p(x).view(n, t, heads, e // heads).transpose(1, 2) for p in (query, key, value))
    if cache is not None:
        if layer in cache:  # one new token after the cached positions
            k = torch.cat([cache[layer][0], k], dim=2)  # (N, heads, seen + 1, d)
            v = torch.cat([cache[layer][1], v], dim=2)
        cache[layer] = (k, v)
    # several positions (training, the prompt): query i reads keys 0..i; one new token: all
    o = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
    return output(o.transpose(1, 2).reshape(n, t, e))  # heads concatenated, projected
'''
HELPERS = {"causal_self_attention": CAUSAL_SELF_ATTENTION}


def build(op: ops.CausalAttention, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import CausalSelfAttention

    layer = CausalSelfAttention(site.in_shape[1], op.heads, ctx.attention, ctx.decoding)
    ctx.own(op, layer)
    return layer


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[1]
    roles = ("query", "key", "value", "output")
    weights = []
    for r in roles:
        weights.append(
            Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.weight", "a.T", "a.T",
                   note="IO -> (out, in)")
        )  # fmt: skip
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    projections = ", ".join(f"self.{n}_{r}" for r in roles)
    return Snippet(
        tuple(
            f"self.{n}_{r} = nn.Linear({e}, {e}{', bias=False' if r == 'key' else ''})"
            for r in roles
        ),
        (
            f"{{x}} = causal_self_attention({{x}}, {projections}, heads={op.heads}, "
            f"cache=cache, layer={q(op.name)})  # {fmt_shape(site.out_shape)}",
        ),
        tuple(weights),
        helpers=("causal_self_attention",),
    )


def weights(op: ops.CausalAttention, m: nn.Module) -> list[Binding]:
    return attention.weights(op, m)
