"""The Rosetta of Chainer, in text: each op of the spec as the ``chainer.links``/``functions``
source that says it.

Each op's rendering is the ``render`` of its module in ``ops/`` (beside its ``build`` and its
weight conversion); this file holds how renderings compose (a sequence, a residual block, a wired
graph: each layer on a variable of its own, ``add`` and ``concat`` reading several) and
``OPS``, the backend's one op table found from ``ops/``, whose text face is ``RENDER``. Chainer is
NCHW throughout, so OIHW kernels and the C, H, W flatten pass unchanged; ``L.Linear.W`` is
(out, in), the canonical IO kernel transposed; the GRU's canonical tensors are split into
``L.NStepGRU``'s six per-gate matrices and biases (``ops/gru.py``). Text only: imports no Chainer.
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

NAME = "chainer"


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable (the model's own sequence over token
    ids first makes the mask of real tokens its masked ops read)."""
    out = statements(parts)
    if site.path == "" and len(site.in_shape) == 1 and ctx.extra.get("mask"):
        line = "valid = {x} != 0  # (N, T): real tokens; id 0 is padding"
        out = Snippet(out.init, (line, *out.forward), out.weights, out.helpers, out.notes)
    return out


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + fmt_shape(site.out_shape))


#: the backend's one op table: the op modules of ``ops/`` (each op's build, rendering and weight
#: conversion side by side) and how they compose; ``lowering.TABLE`` and ``RENDER`` are its two
#: faces
OPS = discover(
    NAME,
    "rosetta.backends.chainer.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", wired_statements),
)
RENDER = OPS.rendering()
