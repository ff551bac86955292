"""The Rosetta of NumPy: every op of the spec as a NumPy forward with its backward beside it.

``TABLE`` (the native face of ``source.OPS``, walked by ``rosetta.backends.driver``) turns each
op, through its module ``ops/<op>.py``, into a *layer* of
:mod:`rosetta.backends.numpy_ref.layers`, a function ``layer(x, ctx) -> (y, back)`` that runs the
op's forward (the kernels of ``conv.py``, ``nn.py``, ``rnn.py``) and returns a closure mapping
the output gradient to the input gradient while adding the op's parameter gradients to
``ctx.grads``. The layers take plain values, so the generated NumPy file carries the same code
verbatim; an op module's ``build`` only reads the op's fields.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, Wiring, lower_op
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Ctx, Layer
from rosetta.backends.numpy_ref.loader import as_input
from rosetta.backends.numpy_ref.source import OPS
from rosetta.runtime import Runtime

NAME = "numpy_ref"
__all__ = ["NAME", "TABLE", "Ctx", "Layer", "apply_op"]


def sequence(parts: list[Layer], site: Site, build: None) -> Layer:
    """Layers in order; the backward plays their closures in reverse. The model's own sequence
    on token ids records their padding mask for the masked ops."""
    return layers.sequential(parts, tokens=is_token_input(site))


def is_token_input(site: Site) -> bool:
    """Whether ``site`` is the whole model's sequence over token ids (T,)."""
    return site.path == "" and site.at_input and len(site.in_shape) == 1


def residual(body: Layer, shortcut: Layer, site: Site, build: None) -> Layer:
    """``body(x) + shortcut(x)``; the output gradient flows into both branches."""
    return layers.residual(body, shortcut)


def graph(parts: list[Layer], wiring: Wiring, site: Site, build: None) -> Layer:
    """Layers wired by index (``wiring.inputs``); the backward sums the gradients of every
    output read more than once."""
    return layers.graph(parts, list(wiring.inputs))


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a NumPy batch (dropout masks from ``runtime.seed``)."""
    layer = lower_op(TABLE, op, tuple(x.shape[1:]), None)
    ctx = Ctx({}, training=training, rng=np.random.default_rng(runtime.seed))
    y, _ = layer(as_input(x, runtime.dtype), ctx)
    return y
