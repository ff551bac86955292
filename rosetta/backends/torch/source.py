"""The Rosetta of PyTorch, in text: each op of the spec as the ``torch.nn`` source that says it.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``; each entry returns a
:class:`rosetta.backends.snippet.Snippet` (the ``__init__`` line with the layer's real name, the
``forward`` line with a shape comment, the weights it owns and their layout conversion).
Activations are NCHW, PyTorch's own, so the canonical OIHW kernels and the C, H, W flatten pass
through unchanged; ``Linear.weight`` is (out, in), the canonical IO kernel transposed, and the
GRU's gate blocks are r | z | n where the spec has z | r | h. A sequence is statements over one
variable, a residual block adds its branches, and a wired graph puts each layer on a variable of
its own (``snippet.wired_statements``: ``add`` writes ``+``, ``concat`` ``torch.cat``). Text
only: imports no torch.
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

NAME = "torch"


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


#: the backend's one op table: the op modules of ``ops/`` (each op's build, rendering and weights
#: side by side) and how they compose; ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = discover(
    NAME,
    "rosetta.backends.torch.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", wired_statements),
)
RENDER = OPS.rendering()
