"""The Rosetta of Keras, in text: how the Keras functional-API lines of the op modules compose.

Keras' functional API reads the same on every engine (TensorFlow, JAX, PyTorch), so the op
modules are shared (``rosetta/backends/keras_common/ops/<op>.py``: each op's ``render`` beside
its ``build`` and its ``weights``), and so are the two composing entries here, ``sequence`` and
``residual`` (and ``graph``, a wired graph's layers on variables of their own): each Keras
backend's ``source.py`` is ``OPS = discover(NAME, "rosetta.backends.keras_common.ops",
Entry("sequence", sequence), Entry("residual", residual), graph=Entry("graph", graph))`` and
``RENDER = OPS.rendering()``. The file is channels-last (NHWC, Keras' default and the layout
TensorFlow's CPU kernels want), so three layout conversions show up in the op modules, each at
the op where it happens: conv kernels OIHW -> HWIO; a flatten of NHWC activations yields rows in
H, W, C order, so the next dense layer's kernel rows are permuted from the spec's C, H, W; and
the GRU's two biases are Keras' one ``bias`` of shape (2, 3H) (its gate order z | r | h is the
spec's own, with ``reset_after=True``). Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import nhwc_shape
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    add_branches,
    statements,
    wired_statements,
)


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the functional API); the model's own
    sequence over token ids first makes the mask of real tokens its masked layers read (an op
    that reads it sets ``ctx.extra["mask"]``: the transformer's)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = keras.ops.not_equal({x}, 0)  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, ``Add``."""
    join = "{x} = layers.Add()([{x}, {s}])  # " + nhwc_shape(site.out_shape)
    return add_branches(body, shortcut, site, join)


graph = wired_statements  # a wired graph: each layer on a variable of its own
