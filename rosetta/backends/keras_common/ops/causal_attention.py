"""causal_attention in Keras: attention's ``SelfAttention`` layer with ``causal=True`` (query i
reads keys j <= i, no padding mask): the same four ``Dense`` projections, roles and bindings as
``attention.py`` (every kernel IO and every bias as stored: no conversion); its core composed in
``keras.ops`` under a lower-triangular mask (TensorFlow, JAX: exact at float32 and float64), or
an engine's fused causal kernel where the engine supplies its core (``Ctx.native["attention"]``:
keras_torch's ``scaled_dot_product_attention(..., is_causal=True)``). Generating, the same
layer writes each new position's keys and values into a static cache (N, context, heads, d) at
the offset and reads the slots written so far (``SelfAttention.attend_cached``,
``keras_common/decoding.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import attention
from rosetta.backends.snippet import RenderCtx, Snippet, attr, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer


def build(op: ops.CausalAttention, site: Site, ctx: Ctx) -> Layer:
    return attention.self_attention(op, site, ctx, causal=True)  # (N, T, E) -> (N, T, E)


def render(op: ops.CausalAttention, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    line = (
        f"{{x}} = SelfAttention({site.in_shape[1]}, {op.heads}, causal=True, name={q(n)})({{x}})"
        f"  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(
        forward=(line,), weights=attention.rendered_weights(op), helpers=("SelfAttention",)
    )
