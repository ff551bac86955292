"""Weights at the boundary: canonical names and layouts <-> PyTorch's tensors, and nothing else.

Every conversion between the spec's layouts and PyTorch's lives here, as a pair of exact NumPy
functions (transposes and block reorders only, so a round trip returns the same bits):

- conv2d ``kernel`` OIHW is ``Conv2d.weight``'s own layout (the memory format, NCHW or
  channels_last, is PyTorch's business: ``copy_`` keeps it); ``bias`` as is;
- dense ``kernel`` IO (in, out) is ``Linear.weight`` (out, in) transposed. Its rows are in the
  spec's CHW flatten order, which is PyTorch's logical order in every memory format: no row
  permutation;
- batchnorm ``gamma, beta`` are ``weight, bias``; ``mean, var`` the buffers ``running_mean,
  running_var`` (inference-mode statistics, never updated: the module stays in ``eval()``);
- embedding ``table`` (V, E) is ``Embedding.weight``; a position table (P, E) is the module's
  ``table``; layer_norm ``gamma, beta`` are ``LayerNorm.weight, bias``;
- attention: each of the four ``*_kernel`` (IO, head-major column blocks) is its
  ``Linear.weight`` transposed, the ``*_bias`` as is (the heads are views of the columns);
- GRU: the spec's gate blocks are ``z | r | h`` along the 3H axis with the kernels as (E, 3H) and
  (H, 3H); PyTorch's ``weight_ih_l0`` (3H, E) and ``weight_hh_l0`` (3H, H) stack ``r | z | n``
  along their rows. So: swap the first two H-blocks, then transpose. The biases: the spec keeps
  the input and recurrent biases separate (reset_after: ``n = tanh(W_h x + b_h + r * (U_h h +
  c_h))``), which is exactly PyTorch's ``bias_ih_l0`` / ``bias_hh_l0`` split with ``b_hn`` inside
  the reset product; the same block swap, no transpose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rosetta.spec import ops

Convert = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Binding:
    """One canonical tensor bound to the PyTorch tensor holding it, with both conversions."""

    name: str  # canonical, e.g. "gru.kernel"
    tensor: torch.Tensor  # the nn.Parameter or buffer
    trainable: bool
    to_native: Convert  # canonical layout -> PyTorch layout
    to_canonical: Convert  # PyTorch layout -> canonical layout


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _transpose(a: np.ndarray) -> np.ndarray:
    return a.T  # (in, out) <-> (out, in)


def _swap_first_two_blocks(a: np.ndarray, axis: int) -> np.ndarray:
    """[z | r | h] <-> [r | z | n] along ``axis`` (3H long): the swap is its own inverse."""
    first, second, third = np.split(a, 3, axis=axis)
    return np.concatenate([second, first, third], axis=axis)


def _gru_kernel_to_native(k: np.ndarray) -> np.ndarray:
    return _swap_first_two_blocks(k, axis=1).T  # (E, 3H) z|r|h -> (3H, E) r|z|n


def _gru_kernel_to_canonical(w: np.ndarray) -> np.ndarray:
    return _swap_first_two_blocks(w.T, axis=1)  # (3H, E) r|z|n -> (E, 3H) z|r|h


def _gru_bias(b: np.ndarray) -> np.ndarray:
    return _swap_first_two_blocks(b, axis=0)  # (3H,) z|r|h <-> r|z|n


def _bindings_of(op: object, m: nn.Module) -> list[Binding]:
    if isinstance(op, ops.Conv2D):
        out = [Binding(f"{op.name}.kernel", m.weight, True, _same, _same)]
        if op.bias:
            out.append(Binding(f"{op.name}.bias", m.bias, True, _same, _same))
        return out
    if isinstance(op, ops.Dense):
        out = [Binding(f"{op.name}.kernel", m.weight, True, _transpose, _transpose)]
        if op.bias:
            out.append(Binding(f"{op.name}.bias", m.bias, True, _same, _same))
        return out
    if isinstance(op, ops.BatchNorm):
        return [
            Binding(f"{op.name}.gamma", m.weight, True, _same, _same),
            Binding(f"{op.name}.beta", m.bias, True, _same, _same),
            Binding(f"{op.name}.mean", m.running_mean, False, _same, _same),
            Binding(f"{op.name}.var", m.running_var, False, _same, _same),
        ]
    if isinstance(op, ops.Embedding):
        return [Binding(f"{op.name}.table", m.weight, True, _same, _same)]
    if isinstance(op, ops.GRU):
        k_in, k_out = _gru_kernel_to_native, _gru_kernel_to_canonical
        return [
            Binding(f"{op.name}.kernel", m.weight_ih_l0, True, k_in, k_out),
            Binding(f"{op.name}.recurrent_kernel", m.weight_hh_l0, True, k_in, k_out),
            Binding(f"{op.name}.bias_input", m.bias_ih_l0, True, _gru_bias, _gru_bias),
            Binding(f"{op.name}.bias_recurrent", m.bias_hh_l0, True, _gru_bias, _gru_bias),
        ]
    if isinstance(op, ops.LayerNorm):
        return [
            Binding(f"{op.name}.gamma", m.weight, True, _same, _same),
            Binding(f"{op.name}.beta", m.bias, True, _same, _same),
        ]
    if isinstance(op, ops.PositionEmbedding):
        return [Binding(f"{op.name}.table", m.table, True, _same, _same)]
    if isinstance(op, ops.Attention):
        out = []
        for role in ("query", "key", "value", "output"):
            linear = getattr(m, role)
            out.append(
                Binding(f"{op.name}.{role}_kernel", linear.weight, True, _transpose, _transpose)
            )
            if linear.bias is not None:  # the key projection has none
                out.append(Binding(f"{op.name}.{role}_bias", linear.bias, True, _same, _same))
        return out
    raise AssertionError(f"no weight binding for {type(op).__name__}")  # lowering.Build.own


def bindings(owners: list[tuple[object, nn.Module]]) -> dict[str, Binding]:
    """Every canonical name of the model -> its binding, in graph order (``owners``: the
    ``(op, module)`` pairs that ``lowering.Build`` collected)."""
    return {b.name: b for op, m in owners for b in _bindings_of(op, m)}


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
