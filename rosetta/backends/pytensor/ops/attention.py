"""attention in PyTensor, composed of its own ops over the time-major (T, N, E) activations: one
``dot`` per projection, the heads split by reshape and ``dimshuffle`` to (N, H, T, d),
``pt.matmul`` (rewritten to the C ``BatchedDot``) for the scores and the weighted values, and
``pt.special.softmax`` (the row maximum subtracted, so large logits never overflow) over scores
whose padding keys are ``switch``-ed to the dtype's lowest finite value (weight exactly 0); a
query whose every key is padding gets weights 0 (a multiplication by "any key"), so its heads
give 0 and no NaN reaches a gradient. "Any key" is one 0/1 per sample, so it multiplies the
weighted values (N, H, T, d) rather than the weights (N, H, T, T): the same numbers exactly (a
product by 1 or 0), T/d times fewer elements, forward and backward.

Weights as is: kernels IO, their columns (rows for the output) in head-major blocks of d, as the
spec's; the key projection has no bias.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.pytensor.ops import Layout, Prev, weight
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer, Run

#: the functions its rendered line calls, written into the generated file
HELPERS = {
    "self_attention": '''
#: an attention op's parameters, in the spec's order (the key projection has no bias)
ATTENTION_ROLES = ("query_kernel", "query_bias", "key_kernel", "value_kernel", "value_bias",
                   "output_kernel", "output_bias")


def self_attention(x, valid, p, name, heads):
    """Multi-head self-attention over (N, T, E) with the projections ``p[name + ".<role>"]``;
    ``valid`` (N, T) marks the keys that take part (a padding key gets weight 0); a row of
    padding only attends to nothing (its heads give 0). The key projection has no bias: the
    softmax would cancel it."""
    wq, bq, wk, wv, bv, wo, bo = (p[f"{name}.{role}"] for role in ATTENTION_ROLES)
    n, t, e = x.shape
    d = wq.get_value().shape[1] // heads

    def split(y):  # (N, T, E) -> (N, heads, T, d): head-major column blocks
        return y.reshape((n, t, heads, d)).dimshuffle(0, 2, 1, 3)

    q, k, v = split(pt.dot(x, wq) + bq), split(pt.dot(x, wk)), split(pt.dot(x, wv) + bv)
    scores = pt.matmul(q, k.dimshuffle(0, 1, 3, 2)) / np.asarray(np.sqrt(d), x.dtype)
    # a padding key scores the lowest finite value: exp(score - row max) is exactly 0, and a
    # row of padding only stays finite (softmax subtracts the row maximum: stable)
    lowest = np.asarray(np.finfo(x.dtype).min, x.dtype)
    weights = pt.special.softmax(pt.switch(valid.dimshuffle(0, "x", "x", 1), scores, lowest), -1)
    any_key = valid.any(axis=1).astype(x.dtype).dimshuffle(0, "x", "x", "x")
    o = pt.matmul(weights, v) * any_key  # (N, heads, T, d); one 0/1 per sample
    return pt.dot(o.dimshuffle(0, 2, 1, 3).reshape((n, t, e)), wo) + bo
''',
}


def build(op: ops.Attention, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    from rosetta.backends.pytensor.lowering import token_mask

    t, e = site.in_shape
    h, d = op.heads, site.in_shape[1] // op.heads
    w = {
        role: ctx.shared(f"{op.name}.{role}", (e, e) if role.endswith("kernel") else (e,))
        for role in ops.ATTENTION_ROLES
    }  # kernels IO, columns (rows for the output) in head-major blocks of d: as the spec
    scale = ctx.const(math.sqrt(d))
    # a masked key's score: the dtype's lowest finite value, so exp(score - row max) is exactly 0
    # and a row of masked keys only stays finite (uniform, then zeroed below): never inf - inf
    lowest = ctx.const(np.finfo(ctx.dtype).min)

    def heads(y: Any, n: Any, order: tuple[int, ...]) -> Any:
        return y.reshape((t, n, h, d)).dimshuffle(*order)  # (T*N, E) -> (T, N, H, d) -> order

    def attention_layer(x: Any, run: Run) -> Any:
        valid = token_mask(run, f"attention {op.name}")  # (N, T)
        n = x.shape[1]
        rows = x.reshape((t * n, e))  # time-major (T, N, E) -> (T*N, E): one dot per projection
        q = heads(pt.dot(rows, w["query_kernel"]) + w["query_bias"], n, (1, 2, 0, 3))  # N,H,T,d
        k_t = heads(pt.dot(rows, w["key_kernel"]), n, (1, 2, 3, 0))  # (N, H, d, T), no bias
        v = heads(pt.dot(rows, w["value_kernel"]) + w["value_bias"], n, (1, 2, 0, 3))
        scores = pt.matmul(q, k_t) / scale  # (N, H, T, T): batched over N and H (BatchedDot)
        keys = valid.dimshuffle(0, "x", "x", 1)  # (N, 1, 1, T): keys that take part
        p = pt.special.softmax(pt.switch(keys, scores, lowest), axis=-1)  # max subtracted: stable
        # a row whose every key is padding attends to nothing: weights 0, gradients 0
        any_key = pt.any(valid, axis=1).astype(ctx.dtype).dimshuffle(0, "x", "x", "x")
        o = pt.matmul(p, v) * any_key  # (N, H, T, d): per sample, the same as weights * any_key
        o = o.dimshuffle(2, 0, 1, 3).reshape((t * n, e))  # heads concatenated, time-major rows
        return (pt.dot(o, w["output_kernel"]) + w["output_bias"]).reshape((t, n, e))

    return attention_layer


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    line = f"{{x}} = self_attention({{x}}, valid, p, {q(op.name)}, heads={op.heads})"
    weights = tuple(weight(f"{op.name}.{r}", note="IO, head-major blocks" if r.endswith("kernel")
                           else "") for r in ops.ATTENTION_ROLES)  # fmt: skip
    return Snippet(forward=(line,), weights=weights, helpers=("self_attention",))


def layout(op: ops.Attention, prev: Prev) -> dict[str, Layout]:
    """No conversion: kernels IO in head-major blocks and biases, as the spec's."""
    return {}
