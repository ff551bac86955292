"""The Rosetta of JAX, in text: each op of the spec as a line of a pure ``forward(params, x)``.

Each op's line is written by its module ``ops/<op>.py`` (``render``, beside the ``build`` that
lowers it and its parameters' layout rule), with the helper functions it calls (``HELPERS``);
this file holds how lines compose (``sequence``, ``residual``) and the one op table ``OPS``
that ``discover`` makes of ``ops/``; ``RENDER`` is its source face, ``lowering.TABLE`` its
native one. The file is plain JAX (``lax`` convolutions and windows, ``lax.scan`` for the GRU)
over a flat dict of arrays keyed by the spec's names, trained with ``optax``. Activations are
channels-last (NHWC, what XLA's CPU and GPU convolutions prefer), so conv kernels are HWIO (from
the spec's OIHW) and the dense layer after a flatten takes its kernel rows in H, W, C order
(permuted from the spec's C, H, W). The GRU keeps the spec's own layout (gate blocks z | r | h,
two biases). Text only: imports no jax.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, Site, discover
from rosetta.backends.jax.ops import nhwc_shape
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    add_branches,
    statements,
    wired_statements,
)

NAME = "jax"


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the model's own sequence over token
    ids first makes the mask of real tokens that its masked ops read)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = {x} != 0  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + nhwc_shape(site.out_shape))


#: the backend's one op table: the op modules of ``ops/`` (each op's build, rendering, helpers
#: and parameter layout side by side) and how they compose; ``lowering.TABLE`` and ``RENDER``
#: are its two faces
OPS = discover(
    NAME,
    "rosetta.backends.jax.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", wired_statements),
)
RENDER = OPS.rendering()
