"""attention in Paddle: ``SelfAttention`` (``lowering.py``), composed from ``paddle.matmul`` and
``F.softmax`` with the spec's key padding mask; each of the four ``*_kernel`` (IO, head-major
column blocks) is its ``nn.Linear.weight`` as is (Paddle's ``(in, out)``), the ``*_bias`` as
is (the heads are reshapes of the columns); the key projection has no bias.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


#: Paddle 3.3's F.scaled_dot_product_attention on the CPU is this composition in Python
#: (``_math_attention``), its boolean mask made additive -inf: a row whose every key is padding
#: would be softmax(-inf, ...) = NaN. Written out here with the spec's rule for that row; ``attend``
#: is the core that causal attention's float64 form shares (``causal_attention.py``).
ATTEND = '''
def attend(q, k, v, keep):
    """softmax(q k^T / sqrt(d)) v per head on (N, T, heads, d); keys where ``keep`` is False
    take no part (score -inf, weight exactly 0)."""
    q, k, v = (a.transpose([0, 2, 1, 3]) for a in (q, k, v))  # (N, heads, T, d)
    sqrt_d = paddle.full([], q.shape[-1], q.dtype).sqrt()  # a tensor of q's dtype, not a float
    scores = paddle.matmul(q, k, transpose_y=True) / sqrt_d  # (N, heads, T, T)
    weights = F.softmax(paddle.where(keep, scores, paddle.full([], float("-inf"), q.dtype)))
    return paddle.matmul(weights, v).transpose([0, 2, 1, 3])  # (N, T, heads, d)
'''
SELF_ATTENTION = '''
def self_attention(x, valid, query, key, value, output, heads):
    """Multi-head self-attention; keys where ``valid`` is False (padding) take no part, and a
    sequence of padding only attends to nothing (its head outputs are 0, not NaN)."""
    n, t, e = x.shape
    split = [n, t, heads, e // heads]  # (N, T, E) -> (N, T, heads, d): head-major columns
    q, k, v = (p(x).reshape(split) for p in (query, key, value))
    any_key = valid.any(axis=1, keepdim=True)  # (N, 1): False for a sequence of padding only
    keep = (valid | ~any_key)[:, None, None, :]  # (N, 1, 1, T); such a row: every key, then 0
    o = attend(q, k, v, keep) * any_key.astype(x.dtype)[:, :, None, None]  # (N, T, heads, d)
    return output(o.reshape([n, t, e]))  # heads concatenated
'''
HELPERS = {"attend": ATTEND, "self_attention": SELF_ATTENTION}


def build(op: ops.Attention, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import SelfAttention

    layer = SelfAttention(site.in_shape[1], op.heads)
    ctx.own(op, layer)
    return layer


def projections(op: ops.Attention | ops.CausalAttention, e: int) -> tuple[Snippet, str]:
    """The four ``nn.Linear(e, e)`` of an attention op (the key's without bias) as a snippet's
    constructor lines and weights, and the forward's arguments naming them."""
    n = attr(op.name)
    roles = ("query", "key", "value", "output")
    weights = []
    for r in roles:
        weights.append(Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.weight", note="(in, out)"))
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    init = tuple(
        f"self.{n}_{r} = nn.Linear({e}, {e}{', bias_attr=False' if r == 'key' else ''})"
        for r in roles
    )
    return Snippet(init, (), tuple(weights)), ", ".join(f"self.{n}_{r}" for r in roles)


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    layers, args = projections(op, site.in_shape[1])
    return Snippet(
        layers.init,
        (
            f"{{x}} = self_attention({{x}}, valid, {args}, heads={op.heads})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        layers.weights,
        helpers=("attend", "self_attention"),
    )


def weights(op: ops.Attention | ops.CausalAttention, m: nn.Layer) -> list[Binding]:
    out = []
    for role in ("query", "key", "value", "output"):
        linear = getattr(m, role)
        out.append(Binding(f"{op.name}.{role}_kernel", linear.weight, True, same, same))
        if linear.bias is not None:  # the key projection has none
            out.append(Binding(f"{op.name}.{role}_bias", linear.bias, True, same, same))
    return out
