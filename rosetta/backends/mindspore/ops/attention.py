"""attention in MindSpore: ``SelfAttention`` (``lowering.py``), composed from ``ops.matmul`` and
``ops.softmax`` with the spec's key padding mask; each of the four ``*_kernel`` (IO, head-major
column blocks) is its ``nn.Dense.weight`` (out, in) transposed, the ``*_bias`` as is; the key
projection has no bias.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same, transpose
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


SELF_ATTENTION = '''
def self_attention(x, valid, query, key, value, output, heads):
    """Multi-head self-attention; keys where valid is False (padding) take no part, and a
    sequence of padding only attends to nothing (its head outputs are 0, not NaN)."""
    n, t, e = x.shape
    q, k, v = (p(x).reshape(n, t, heads, e // heads).transpose(0, 2, 1, 3)
               for p in (query, key, value))  # (N, H, T, d)
    any_key = valid.any(axis=1, keep_dims=True)  # (N, 1): False for padding only
    keep = (valid | ~any_key).reshape(n, 1, 1, t)  # such a row: every key, then 0
    sqrt_d = ops.sqrt(ms.Tensor(e // heads, x.dtype))  # a tensor of x's dtype, not a float
    scores = ops.matmul(q, k.transpose(0, 1, 3, 2)) / sqrt_d  # (N, H, T, T)
    weights = ops.softmax(ops.where(keep, scores, ms.Tensor(float("-inf"), x.dtype)), axis=-1)
    o = ops.matmul(weights, v) * any_key.astype(x.dtype).reshape(n, 1, 1, 1)
    return output(o.transpose(0, 2, 1, 3).reshape(n, t, e))  # heads concatenated
'''
HELPERS = {"self_attention": SELF_ATTENTION}


def build(op: ops.Attention, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import SelfAttention

    cell = SelfAttention(site.in_shape[1], op.heads, ctx.ms_dtype)
    ctx.own(op, cell)
    return cell


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[1]
    ctx.extra["mask"] = True
    roles = ("query", "key", "value", "output")
    weights = []
    for r in roles:
        weights.append(Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.weight", "a.T", "a.T",
                              note="IO -> (out, in)"))  # fmt: skip
        if r != "key":  # the key projection has no bias (the softmax cancels one)
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.bias"))
    projections = ", ".join(f"self.{n}_{r}" for r in roles)
    return Snippet(
        tuple(
            f"self.{n}_{r} = nn.Dense({e}, {e}{', has_bias=False' if r == 'key' else ''}, "
            "dtype=dtype)"
            for r in roles
        ),
        (
            f"{{x}} = self_attention({{x}}, valid, {projections}, heads={op.heads})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        tuple(weights),
        helpers=("self_attention",),
    )


def weights(op: ops.Attention, m: nn.Cell) -> list[Binding]:
    out = []
    for role in ("query", "key", "value", "output"):
        dense = getattr(m, role)
        out.append(Binding(f"{op.name}.{role}_kernel", dense.weight, True, transpose, transpose))
        if dense.has_bias:  # the key projection has none
            out.append(Binding(f"{op.name}.{role}_bias", dense.bias, True, same, same))
    return out
