"""causal_attention in ONNX: attention's ``MatMul``/``Softmax`` nodes (``attention.emitter``,
``causal=True``), the causal mask a constant (T, T) additive bias, 0 at key ``j <= i`` and -inf
after (one initializer per graph, read by every layer); no padding mask. Opset 13's nodes only
(a constant rather than ``Trilu``, which is opset 14's). In the generation graph the layer reads
and writes its KV cache, under a (T, S + T) mask made from the cache's length
(``attention.emitter``'s ``cached``, ``graph.steps``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.export.ops import attention
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.CausalAttention, site: Site, ctx: Build) -> Emit:
    return attention.emitter(op, site, causal=True)


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    return attention.lines(op, site, ctx, causal=True)
