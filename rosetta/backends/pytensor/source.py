"""The Rosetta of PyTensor, in text: each op of the spec as a line of a symbolic ``forward``.

Each op's line is written by its module in ``ops/`` (``render``, beside its ``build`` and its
``layout``); this file holds how the lines compose (``sequence``, ``residual``), the helpers
several ops' lines call, and the backend's one table, ``OPS`` (``rosetta.backends.driver
.discover``), whose source face is ``RENDER``. The generated file is plain PyTensor:
``forward(p, x, rngs)`` over a dict of ``shared`` variables keyed by the spec's names, the
convolution as its kernel taps and one ``dot`` (PyTensor 3 has no CNN convolution op),
max-pooling as an ``argmax`` over the stacked taps, ``scan`` for the GRU, ``pytensor.grad`` and
the optimiser as the compiled function's ``updates``. Activations are channels-last (NHWC), so
conv kernels are HWIO (from the spec's OIHW) and the dense layer after a flatten takes its
kernel rows in H, W, C order. The GRU keeps the spec's own layout. The Transformer's ops are
helpers over batch-major ``(N, T, E)`` (``layer_norm``, ``gelu`` with ``pt.erf``,
``self_attention`` with ``pt.matmul`` and ``pt.special.softmax`` over the key padding mask,
``masked_mean``), the mask ``valid`` made once from the token ids. Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, Site, discover
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    add_branches,
    fmt_shape,
    nhwc,
    statements,
    wired_statements,
)

NAME = "pytensor"

#: the functions that the lines of several ops call (the padding and the kernel taps of
#: convolutions and max-pooling), written into the file beside the layout helpers; an op's own
#: helpers are its module's ``HELPERS``
HELPERS: dict[str, str] = {
    "pad": '''
def pad(x, n, padding, value):
    """NHWC ``x`` (batch size ``n``) with (top, bottom, left, right) cells of ``value`` around
    each image."""
    top, bottom, left, right = padding
    if not any(padding):
        return x
    _, h, w, c = x.type.shape  # static: only the batch size is left open
    full = pt.alloc(pt.constant(np.asarray(value, x.dtype)), n, h + top + bottom,
                    w + left + right, c)
    return pt.set_subtensor(full[:, top : top + h, left : left + w, :], x)
''',
    "taps": '''
def taps(x, kernel, stride, out_hw):
    """The input under each kernel tap (i, j), row-major: KH*KW strided slices (N, Ho, Wo, C)."""
    (ho, wo), (sh, sw) = out_hw, stride
    return [
        x[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw, :]
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]
''',
}


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the model's own sequence over token
    ids first makes the mask of real tokens its masked ops read)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = pt.neq({x}, 0)  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    out = fmt_shape(nhwc(site.out_shape))
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + out)


#: the backend's one op table: the op modules of ``ops/`` (each op's build, rendering and layout
#: side by side) and how they compose; ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = discover(
    NAME,
    "rosetta.backends.pytensor.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    helpers=HELPERS,
    graph=Entry("graph", wired_statements),
)
RENDER = OPS.rendering()
