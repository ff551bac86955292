"""Weights at the boundary: the bound parameters of a built model, loaded and read in canonical
layout.

Each op module's ``weights(op, cell)`` (``ops/<op>.py``) binds its canonical tensors to the
MindSpore parameters holding them, with the exact conversions (transposes and block reorders, so a
round trip returns the same bits). This file walks those bindings: copy canonical arrays in (the
parameter's dtype kept), read values and gradients back out.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.binding import Binding
from rosetta.backends.mindspore.compat import ms
from rosetta.backends.mindspore.source import OPS

nn = ms.nn


def bindings(owners: list[tuple[object, nn.Cell]]) -> dict[str, Binding]:
    """Every canonical name of the model -> its binding, in graph order (``owners``: the
    ``(op, cell)`` pairs that ``lowering.Build`` collected)."""
    return {b.name: b for op, m in owners for b in OPS.module(op).weights(op, m)}


def np_dtype(t) -> np.dtype:
    """A MindSpore tensor's dtype as NumPy's."""
    return np.dtype(str(t.dtype).lower())


def load(binds: dict[str, Binding], params: dict[str, np.ndarray]) -> None:
    """Copy canonical ``params`` into the bound parameters (their dtype kept, the same
    parameter objects, written in place by ``ops.assign``: an optimiser holding them and a graph
    ``mindspore.jit`` compiled sees the new values; ``set_data`` left a compiled forward on the
    old ones, measured)."""
    for name, b in binds.items():
        native = np.ascontiguousarray(b.to_native(np.asarray(params[name])), np_dtype(b.tensor))
        ms.ops.assign(b.tensor, ms.Tensor(native))  # in place: a compiled graph sees it too


def read(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """Every bound parameter in canonical layout (fresh NumPy arrays, never views)."""
    return {n: np.array(b.to_canonical(b.tensor.asnumpy()), order="C") for n, b in binds.items()}


def grads_to_canonical(binds: dict[str, Binding], grads: dict[str, np.ndarray]) -> dict:
    """Gradients by canonical name (``grads``: by the same names, native layout) in canonical
    layout."""
    return {n: np.array(binds[n].to_canonical(g), order="C") for n, g in grads.items()}
