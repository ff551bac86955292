"""attention in PyTorch: ``SelfAttention`` (SDPA or composed, ``Build.attention``); each
``*_kernel`` (IO) is its ``Linear.weight`` transposed, the key projection has no bias.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same, transpose
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


SELF_ATTENTION = '''
def self_attention(x, valid, query, key, value, output, heads):
    """Multi-head self-attention; keys where ``valid`` is False (padding) take no part."""
    n, t, e = x.shape
    q, k, v = (p(x).view(n, t, heads, e // heads).transpose(1, 2) for p in (query, key, value))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=valid[:, None, None, :])
    return output(o.transpose(1, 2).reshape(n, t, e))  # heads concatenated, projected
'''
HELPERS = {"self_attention": SELF_ATTENTION}


def build(op: ops.Attention, site: Site, ctx: Build) -> nn.Module:
    from rosetta.backends.torch.lowering import SelfAttention

    layer = SelfAttention(site.in_shape[1], op.heads, ctx.attention)
    ctx.own(op, layer)
    return layer


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[1]
    ctx.extra["mask"] = True
    roles = ("query", "key", "value", "output")
    weights = []
    for r in roles:
        weights.append(
            Weight(
                f"{op.name}.{r}_kernel",
                f"model.{n}_{r}.weight",
                "a.T",
                "a.T",
                note="IO -> (out, in)",
            )
        )
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    projections = ", ".join(f"self.{n}_{r}" for r in roles)
    return Snippet(
        tuple(
            f"self.{n}_{r} = nn.Linear({e}, {e}{', bias=False' if r == 'key' else ''})"
            for r in roles
        ),
        (
            f"{{x}} = self_attention({{x}}, valid, {projections}, heads={op.heads})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        tuple(weights),
        helpers=("self_attention",),
    )


def weights(op: ops.Attention, m: nn.Module) -> list[Binding]:
    out = []
    for role in ("query", "key", "value", "output"):
        linear = getattr(m, role)
        out.append(Binding(f"{op.name}.{role}_kernel", linear.weight, True, transpose, transpose))
        if linear.bias is not None:  # the key projection has none
            out.append(Binding(f"{op.name}.{role}_bias", linear.bias, True, same, same))
    return out
