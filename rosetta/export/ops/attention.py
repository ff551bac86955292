"""attention in ONNX: ``MatMul``/``Softmax``, the key padding mask an additive 0 / -inf bias.

The one home of self-attention's ONNX form: :func:`emitter` (the nodes) and :func:`lines` (their
text) serve ``attention`` (the key padding mask, a row of padding only zeroed) and, with
``causal=True``, ``causal_attention`` (``ops/causal_attention.py``): the same projections, head
split, scale and ``Softmax``, the bias added to the scores being the constant (T, T)
lower-triangular one of :func:`causal_bias` instead of the token mask's ``key_bias``. In the
generation graph (``b.decoding``: ``graph.generation_model``) causal attention reads layer
``i``'s cached keys and values ``past_key_<i>``/``past_value_<i>`` (N, heads, S, d), writes them
with the new positions' appended as ``present_key_<i>``/``present_value_<i>`` (N, heads, S + T,
d) and reads those, under the (T, S + T) mask ``graph.steps(b, "bias")`` (key ``j <= S + i``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.export.ops import mask_lines
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def causal_bias(b: Build, t: int) -> str:
    """The (T, T) additive causal mask, one constant initializer per graph (every layer reads
    it): 0 where query ``i`` may read key ``j`` (``j <= i``), -inf above the diagonal, so a later
    key's weight after ``Softmax`` is exactly 0; the diagonal keeps every row one finite key."""
    return b.const(f"causal_bias{t}", np.triu(np.full((t, t), -np.inf), 1))  # (T, T)


def emitter(op: ops.Attention | ops.CausalAttention, site: Site, causal: bool) -> Emit:
    """Self-attention's nodes: the key padding mask (``attention``) or, ``causal``, the
    lower-triangular :func:`causal_bias` and no padding mask (``causal_attention``)."""
    from rosetta.export.graph import PAST_KEY, PAST_VALUE, PRESENT_KEY, PRESENT_VALUE, mask, steps

    t, e = site.in_shape
    h, d = op.heads, e // op.heads
    n = op.name

    def heads(b: Build, x: str, role: str, bias: bool, perm: list[int]) -> str:
        y = b.one("MatMul", [x, f"{n}.{role}_kernel"])  # (N, T, E)
        if bias:
            y = b.one("Add", [y, f"{n}.{role}_bias"])
        split = b.const(f"shape_{h}x{d}", [0, 0, h, d], "int64")  # 0: keep N and T
        return b.one("Transpose", [b.one("Reshape", [y, split])], perm=perm)

    def cached(b: Build, x: str) -> tuple[str, str, str]:
        """The generation graph's keys (N, H, d, S + T) and values (N, H, S + T, d): layer
        ``i``'s cache with this call's appended (written out as the presents), and its mask."""
        i, b.caches = b.caches, b.caches + 1
        k = heads(b, x, "key", False, [0, 2, 1, 3])  # (N, H, T, d): no key bias
        v = heads(b, x, "value", True, [0, 2, 1, 3])  # (N, H, T, d)
        k = b.named(PRESENT_KEY.format(i), "Concat", [PAST_KEY.format(i), k], axis=2)
        v = b.named(PRESENT_VALUE.format(i), "Concat", [PAST_VALUE.format(i), v], axis=2)
        k = b.one("Transpose", [k], perm=[0, 1, 3, 2])  # (N, H, d, S + T)
        return k, v, steps(b, "bias")  # bias (T, S + T): key j <= query S + i

    def emit(b: Build, x: str) -> str:
        q = heads(b, x, "query", True, [0, 2, 1, 3])  # (N, H, T, d)
        any_key = None
        if causal and b.decoding:
            k, v, bias = cached(b, x)
        else:
            if causal:  # (T, T): key j <= query i, broadcast over N and the heads
                bias = causal_bias(b, t)
            else:  # (N, 1, 1, T): the key padding mask
                bias, any_key = mask(b, "key_bias"), mask(b, "any_key")
            k = heads(b, x, "key", False, [0, 2, 3, 1])  # (N, H, d, T): no key bias
            v = heads(b, x, "value", True, [0, 2, 1, 3])  # (N, H, T, d)
        scores = b.one("Div", [b.one("MatMul", [q, k]), b.const(f"sqrt{d}", np.sqrt(d))])
        p = b.one("Softmax", [b.one("Add", [scores, bias])], axis=-1)  # (N, H, T, T or S + T)
        o = b.one("Transpose", [b.one("MatMul", [p, v])], perm=[0, 2, 1, 3])  # (N, T, H, d)
        o = b.one("Reshape", [o, b.const(f"shape_{e}", [0, 0, e], "int64")])  # (N, T, E)
        if any_key is not None:
            o = b.one("Mul", [o, any_key])  # a row of padding only: its head outputs are 0
        return b.one("Add", [b.one("MatMul", [o, f"{n}.output_kernel"]), f"{n}.output_bias"])

    return emit


def lines(
    op: ops.Attention | ops.CausalAttention, site: Site, ctx: RenderCtx, causal: bool
) -> Snippet:
    """The text of :func:`emitter`'s nodes (the masks' lines once per graph)."""
    n, (t, e), h = op.name, site.in_shape, op.heads
    d = e // h
    split = f"[0, 0, {h}, {d}]"
    if causal:
        done = ctx.extra.setdefault("onnx_mask", set())
        made = () if "causal_bias" in done else (
            f"causal_bias = triu(full(({t}, {t}), -inf), 1)  # constant (T, T): 0 at key j <= "
            "query i, -inf after",
        )  # fmt: skip
        done.add("causal_bias")
        bias, merge = "causal_bias", "  # heads concatenated"
    else:
        made = mask_lines(ctx, "key_bias", "any_key")
        bias, merge = "key_bias", "  # heads concatenated; a row of padding only: 0"
    merged = f"Reshape(Transpose(MatMul(p, v), perm=[0, 2, 1, 3]), [0, 0, {e}])"
    forward = (
        *made,
        f"q = Transpose(Reshape(Add(MatMul({{x}}, {n}.query_kernel), {n}.query_bias), {split}), "
        f"perm=[0, 2, 1, 3])  # (N, {h}, {t}, {d})",
        f"k = Transpose(Reshape(MatMul({{x}}, {n}.key_kernel), {split}), perm=[0, 2, 3, 1])"
        f"  # (N, {h}, {d}, {t}): no key bias",
        f"v = Transpose(Reshape(Add(MatMul({{x}}, {n}.value_kernel), {n}.value_bias), {split}), "
        f"perm=[0, 2, 1, 3])",
        f"p = Softmax(Add(Div(MatMul(q, k), sqrt({d})), {bias}), axis=-1)"
        "  # a masked key: weight exactly 0",
        f"{{x}} = {merged if causal else f'Mul({merged}, any_key)'}{merge}",
        f"{{x}} = Add(MatMul({{x}}, {n}.output_kernel), {n}.output_bias)"
        f"  # {fmt_shape(site.out_shape)}",
    )
    w = tuple(Weight(f"{n}.{r}", f"{n}.{r}") for r in ops.ATTENTION_ROLES)
    return Snippet(forward=forward, weights=w)


def build(op: ops.Attention, site: Site, ctx: Build) -> Emit:
    return emitter(op, site, causal=False)


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    return lines(op, site, ctx, causal=False)
