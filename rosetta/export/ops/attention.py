"""attention in ONNX: ``MatMul``/``Softmax``, the key padding mask an additive 0 / -inf bias."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.export.ops import mask_lines
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Attention, site: Site, ctx: Build) -> Emit:
    from rosetta.export.graph import mask

    _, e = site.in_shape
    h, d = op.heads, e // op.heads
    n = op.name

    def heads(b: Build, x: str, role: str, bias: bool, perm: list[int]) -> str:
        y = b.one("MatMul", [x, f"{n}.{role}_kernel"])  # (N, T, E)
        if bias:
            y = b.one("Add", [y, f"{n}.{role}_bias"])
        split = b.const(f"shape_{h}x{d}", [0, 0, h, d], "int64")  # 0: keep N and T
        return b.one("Transpose", [b.one("Reshape", [y, split])], perm=perm)

    def emit(b: Build, x: str) -> str:
        key_bias, any_key = mask(b, "key_bias"), mask(b, "any_key")
        q = heads(b, x, "query", True, [0, 2, 1, 3])  # (N, H, T, d)
        k = heads(b, x, "key", False, [0, 2, 3, 1])  # (N, H, d, T): no key bias
        v = heads(b, x, "value", True, [0, 2, 1, 3])  # (N, H, T, d)
        scores = b.one("Div", [b.one("MatMul", [q, k]), b.const(f"sqrt{d}", np.sqrt(d))])
        p = b.one("Softmax", [b.one("Add", [scores, key_bias])], axis=-1)  # (N, H, T, T)
        o = b.one("Transpose", [b.one("MatMul", [p, v])], perm=[0, 2, 1, 3])  # (N, T, H, d)
        o = b.one("Reshape", [o, b.const(f"shape_{e}", [0, 0, e], "int64")])  # (N, T, E)
        o = b.one("Mul", [o, any_key])  # a row of padding only: its head outputs are 0
        return b.one("Add", [b.one("MatMul", [o, f"{n}.output_kernel"]), f"{n}.output_bias"])

    return emit


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n, (t, e), h = op.name, site.in_shape, op.heads
    d = e // h
    split = f"[0, 0, {h}, {d}]"
    lines = (
        *mask_lines(ctx, "key_bias", "any_key"),
        f"q = Transpose(Reshape(Add(MatMul({{x}}, {n}.query_kernel), {n}.query_bias), {split}), "
        f"perm=[0, 2, 1, 3])  # (N, {h}, {t}, {d})",
        f"k = Transpose(Reshape(MatMul({{x}}, {n}.key_kernel), {split}), perm=[0, 2, 3, 1])"
        f"  # (N, {h}, {d}, {t}): no key bias",
        f"v = Transpose(Reshape(Add(MatMul({{x}}, {n}.value_kernel), {n}.value_bias), {split}), "
        f"perm=[0, 2, 1, 3])",
        f"p = Softmax(Add(Div(MatMul(q, k), sqrt({d})), key_bias), axis=-1)"
        "  # a masked key: weight exactly 0",
        f"{{x}} = Mul(Reshape(Transpose(MatMul(p, v), perm=[0, 2, 1, 3]), [0, 0, {e}]), any_key)"
        "  # heads concatenated; a row of padding only: 0",
        f"{{x}} = Add(MatMul({{x}}, {n}.output_kernel), {n}.output_bias)"
        f"  # {fmt_shape(site.out_shape)}",
    )
    w = tuple(Weight(f"{n}.{r}", f"{n}.{r}") for r in ops.ATTENTION_ROLES)
    return Snippet(forward=lines, weights=w)
