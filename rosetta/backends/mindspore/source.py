"""The Rosetta of MindSpore, in text: each op of the spec as the ``mindspore.nn`` source saying it.

Each op's rendering is the ``render`` of its module ``ops/<op>.py`` (beside its build and its
weight mapping); this file holds how the snippets compose (a sequence, a residual block, a wired
graph) and ``OPS``, the backend's one op table found from ``ops/``; ``RENDER`` is its text face.
Activations are NCHW, MindSpore's default ``data_format``; ``nn.Dense.weight`` is ``(out, in)``
(the canonical IO kernel transposed, as PyTorch); the GRU's gate blocks are r | z | n where the
spec has z | r | h. Text only: imports no MindSpore.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, Site, discover
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    add_branches,
    fmt_shape,
    statements,
    wired_statements,
)

NAME = "mindspore"


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
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + fmt_shape(site.out_shape))


#: the backend's one op table: the op modules of ``ops/`` and how they compose;
#: ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = discover(
    NAME,
    "rosetta.backends.mindspore.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", wired_statements),
)
RENDER = OPS.rendering()
