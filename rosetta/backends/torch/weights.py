"""Weights at the boundary: the bound tensors of a built model, loaded and read in canonical layout.

Each op module's ``weights(op, module)`` (``ops/<op>.py``) binds its canonical tensors to the
PyTorch tensors holding them, with the exact conversions (transposes and block reorders, so a
round trip returns the same bits). This file walks those bindings: copy canonical arrays in
(dtype, device and memory format kept), read values and gradients back out.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rosetta.backends.binding import Binding
from rosetta.backends.torch.source import OPS


def bindings(owners: list[tuple[object, nn.Module]]) -> dict[str, Binding]:
    """Every canonical name of the model -> its binding, in graph order (``owners``: the
    ``(op, module)`` pairs that ``lowering.Build`` collected)."""
    return {b.name: b for op, m in owners for b in OPS.module(op).weights(op, m)}


def load(binds: dict[str, Binding], params: dict[str, np.ndarray]) -> None:
    """Copy canonical ``params`` into the bound tensors (dtype, device, memory format kept)."""
    with torch.no_grad():
        for name, b in binds.items():
            native = np.ascontiguousarray(b.to_native(np.asarray(params[name])))
            b.tensor.copy_(torch.from_numpy(native))


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").numpy()


def read(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """Every bound tensor in canonical layout (fresh NumPy arrays, never views of the model)."""
    return {n: np.array(b.to_canonical(_to_numpy(b.tensor)), order="C") for n, b in binds.items()}


def read_grads(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """The ``.grad`` of every trainable tensor in canonical layout (zeros where none flowed)."""
    out = {}
    for n, b in binds.items():
        if b.trainable:
            g = b.tensor.grad
            g = torch.zeros_like(b.tensor, device="cpu") if g is None else g
            out[n] = np.array(b.to_canonical(_to_numpy(g)), order="C")
    return out
