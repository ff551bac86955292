"""The exporter's op table, framework-free: the op modules of ``rosetta/export/ops/`` and how
nodes compose (a sequence chains them, a residual block joins its branches with one ``Add``, a
wired graph gives each layer's output a tensor of its own and a variadic op, ``add`` or
``concat``, reads several: ``{x0}``, ``{x1}``... in its text). ``graph.TABLE`` (nodes) and
``RENDER`` (text, the serving engines' ``source.py``) are its faces.
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
from rosetta.export.ops import NAME


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Nodes in order, each reading the previous one's output."""
    return statements(parts)


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The body on the input, the shortcut on the kept input, joined by one ``Add`` node."""
    return add_branches(body, shortcut, site, "{x} = Add({x}, {s})  # " + fmt_shape(site.out_shape))


#: the exporter's one op table (the op modules of ``rosetta/export/ops/``); ``graph.TABLE`` (nodes)
#: and ``RENDER`` (text) are its two faces
OPS = discover(
    NAME,
    "rosetta.export.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", wired_statements),
)
RENDER = OPS.rendering()
#: ops whose ONNX form needs a newer opset than :data:`rosetta.export.MIN_OPSET` (the export
#: refuses them below it, in one line naming the op and the opset): each module's ``MIN_OPSET``
MIN_OPSET_OF: dict[type, int] = {
    op: m.MIN_OPSET for op, m in OPS.entries.items() if hasattr(m, "MIN_OPSET")
}
