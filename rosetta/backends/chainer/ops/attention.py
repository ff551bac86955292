"""attention in Chainer: ``lowering.SelfAttention``, four linear projections (the key's without
bias) and the scores, softmax and weighted sum from ``chainer.functions`` (padding keys hold the
dtype's lowest value; a row without any real key gives 0). Weights: each ``*_kernel`` (IO) is
its projection's ``Linear.W`` (out, in) transposed, each ``*_bias`` its ``b``; the output
projection is the link ``out_proj`` (``PATHS``). AdamW may decay the kernels
(``decay_paths``). ``causal_attention`` is the same link, helper and weights with their
``causal`` flag (``ops/causal_attention.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape, q
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx

SELF_ATTENTION = '''
def self_attention(
    x, valid, query, key, value, output, heads, causal=False, cache=None, layer=""
):
    """Multi-head self-attention. Over the token mask ``valid`` (N, T): padding keys take no
    part, a row of padding only gives 0. ``causal`` (no mask, ``valid`` None): query i reads
    keys 0..i only; generating, ``cache`` (a dict) keeps each layer's keys and values of the
    positions seen so far: the prompt's positions fill it, then each new token reads them and
    adds its own."""
    n, t, e = x.shape
    d = e // heads

    def split(y):
        y = F.transpose(F.reshape(y, (n, t, heads, d)), (0, 2, 1, 3))  # (N, heads, T, d)
        return F.reshape(y, (n * heads, t, d))

    q, k, v = (split(p(x, n_batch_axes=2)) for p in (query, key, value))
    if cache is not None:
        if layer in cache:  # new positions after the cached ones
            k = F.concat([cache[layer][0], k], axis=1)  # (N * heads, seen + T, d)
            v = F.concat([cache[layer][1], v], axis=1)
        cache[layer] = (k, v)
    s = k.shape[1]  # the keys: the positions seen before these T, then these
    scores = F.matmul(q, k, transb=True) * (1 / np.sqrt(d))  # (N * heads, T, S)
    if causal:  # (T, S) lower triangle: key j <= query i, the queries the last T positions
        keys = np.broadcast_to(np.tri(t, s, k=s - t, dtype=bool), scores.shape)
    else:  # each sample's real keys, for every query
        keys = np.broadcast_to(np.repeat(valid, heads, axis=0)[:, None, :], scores.shape)
    scores = F.where(keys, scores, np.full(scores.shape, np.finfo(x.dtype).min, x.dtype))
    o = F.matmul(F.softmax(scores, axis=2), v)
    if not causal:
        o = o * np.repeat(valid.any(axis=1), heads)[:, None, None].astype(x.dtype)
    o = F.reshape(F.transpose(F.reshape(o, (n, heads, t, d)), (0, 2, 1, 3)), (n, t, e))
    return output(o, n_batch_axes=2)
'''
HELPERS = {"self_attention": SELF_ATTENTION}

#: attention role -> the SelfAttention link's attribute (kernels IO <-> Linear.W (O, I))
PATHS = {
    "query_kernel": "query.W", "query_bias": "query.b", "key_kernel": "key.W",
    "value_kernel": "value.W", "value_bias": "value.b", "output_kernel": "out_proj.W",
    "output_bias": "out_proj.b",
}  # fmt: skip


def build(op: ops.Attention, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import SelfAttention

    return ctx.own(op, SelfAttention(site.in_shape[1], op.heads))


def render(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    ctx.extra["mask"] = True
    return attention_snippet(op, site, causal=False)


def attention_snippet(
    op: ops.Attention | ops.CausalAttention, site: Site, *, causal: bool
) -> Snippet:
    """An attention's four ``L.Linear`` projections (the key's without bias), its weights (each
    ``*_kernel`` the transpose of ``W``) and its ``self_attention`` line: over the token mask
    ``valid``, or ``causal`` (no mask; the forward's ``cache`` passed, the op's name its key)."""
    n = attr(op.name)
    e = site.in_shape[1]
    roles = (("query", ""), ("key", ", nobias=True"), ("value", ""), ("output", ""))
    weights = []
    for r, nb in roles:
        weights.append(Weight(f"{op.name}.{r}_kernel", f"model.{n}_{r}.W", "a.T", "a.T"))
        if not nb:
            weights.append(Weight(f"{op.name}.{r}_bias", f"model.{n}_{r}.b"))
    projections = ", ".join(f"self.{n}_{r}" for r, _ in roles)
    mask, flag = ("valid", "")
    if causal:  # no mask; generating, the forward's cache, the op's name its key
        mask, flag = "None", f", causal=True, cache=cache, layer={q(op.name)}"
    return Snippet(
        tuple(f"self.{n}_{r} = L.Linear({e}, {e}{nb})" for r, nb in roles),
        (
            f"{{x}} = self_attention({{x}}, {mask}, {projections}, heads={op.heads}{flag})"
            f"  # {fmt_shape(site.out_shape)}",
        ),
        tuple(weights),
        helpers=("self_attention",),
    )


def to_native(op: ops.Attention, params) -> dict:
    return {
        path: params[f"{op.name}.{role}"].T
        if role.endswith("kernel")
        else params[f"{op.name}.{role}"]
        for role, path in PATHS.items()
    }


def to_canonical(op: ops.Attention, read: Read) -> dict:
    return {
        f"{op.name}.{role}": read(path).T if role.endswith("kernel") else read(path)
        for role, path in PATHS.items()
    }


def decay_paths(op: ops.Attention) -> dict[str, str]:
    """The link attribute of each canonical parameter AdamW may decay (the four kernels)."""
    return {f"{op.name}.{r}": path for r, path in PATHS.items() if r.endswith("kernel")}
