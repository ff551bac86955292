"""The Rosetta of NumPy, in text: each op of the spec as a layer of the plain-NumPy file.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``. The generated NumPy file is
built like the reference itself: each op becomes a layer ``layer(x, ctx) -> (y, back)`` (made by
a small factory of the file, ``conv2d("conv1", ...)``, running the reference's own kernels), a
sequence plays the layers' backward closures in reverse, a residual block sends the gradient
down both branches. Canonical layouts throughout: no weight changes layout. Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, Site, Wiring, discover
from rosetta.backends.snippet import RenderCtx, Snippet, combine, fmt_shape

NAME = "numpy_ref"


def _expr(parts: list[Snippet]) -> list[str]:
    """The parts' lines as list items: each part ends in a comma (its comment kept after it)."""
    out = []
    for p in parts:
        lines = list(p.forward)
        last = lines[-1]
        code, sep, comment = last.partition("  # ")
        if not code.endswith(","):
            lines[-1] = code + "," + (sep + comment if sep else "")
        out.extend("    " + line for line in lines)
    return out


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """``sequential([...])``: the layers in order (the model's own, on token ids, records their
    padding mask: ``tokens=True``)."""
    tokens = site.path == "" and site.at_input and len(site.in_shape) == 1
    return combine(parts, ("sequential([", *_expr(parts), "], tokens=True)" if tokens else "])"))


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """``residual(body, shortcut)``: ``body(x) + shortcut(x)``."""
    lines = ("residual(", *_expr([body, shortcut]), f"),  # {fmt_shape(site.out_shape)}")
    return combine([body, shortcut], lines)


def graph(parts: list[Snippet], wiring: Wiring, site: Site, ctx: RenderCtx) -> Snippet:
    """``graph([...], inputs=[...])``: the layers, each reading the outputs it names (-1: the
    graph's input), the last one's output the graph's."""
    reads = ", ".join(str(tuple(src)) for src in wiring.inputs)
    lines = ("graph([", *_expr(parts), f"], inputs=[{reads}]),  # {fmt_shape(site.out_shape)}")
    return combine(parts, lines)


#: the backend's one op table: the op modules of ``ops/`` and how they compose;
#: ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = discover(
    NAME,
    "rosetta.backends.numpy_ref.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", graph),
)
RENDER = OPS.rendering()
