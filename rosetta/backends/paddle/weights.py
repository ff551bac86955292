"""Weights at the boundary: canonical names and layouts <-> Paddle's tensors, and nothing else.

Every conversion between the spec's layouts and Paddle's lives here, as a pair of exact NumPy
functions (transposes and block reorders only, so a round trip returns the same bits):

- conv2d ``kernel`` OIHW is ``nn.Conv2D.weight``'s own layout (NCHW activations); ``bias`` as is;
- dense ``kernel`` IO (in, out) is ``nn.Linear.weight`` itself: Paddle stores ``(in, out)`` and
  computes ``x @ W + b`` (PyTorch stores the transpose). Its rows are in the spec's CHW flatten
  order, Paddle's NCHW order: no permutation;
- batchnorm ``gamma, beta`` are ``weight, bias``; ``mean, var`` the buffers ``_mean,
  _variance`` (inference-mode statistics, never updated: the layer stays in ``eval()``);
- embedding ``table`` (V, E) is ``nn.Embedding.weight``; a position table (P, E) is the layer's
  ``table``; layer_norm ``gamma, beta`` are ``nn.LayerNorm.weight, bias``;
- attention: each of the four ``*_kernel`` (IO, head-major column blocks) is its
  ``nn.Linear.weight`` as is (Paddle's ``(in, out)``), the ``*_bias`` as is (the heads are
  reshapes of the columns); the key projection has no bias;
- GRU: the spec's gate blocks are ``z | r | h`` along the 3H axis with the kernels as (E, 3H) and
  (H, 3H); Paddle's ``weight_ih_l0`` (3H, E) and ``weight_hh_l0`` (3H, H) stack ``r | z | c``
  along their rows (PyTorch's layout). So: swap the first two H-blocks, then transpose. The
  biases: the spec keeps the input and recurrent biases apart (reset_after: ``h~ = tanh(W_h x +
  b_h + r * (U_h h + c_h))``), which is Paddle's ``bias_ih_l0`` / ``bias_hh_l0`` split with
  ``b_hc`` inside the reset product (``GRUCell``'s docstring, and its fused CPU ``rnn`` kernel:
  checked against the reference by the conformance suite); the same block swap, no transpose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rosetta.backends.paddle.compat import paddle
from rosetta.spec import ops

nn = paddle.nn

Convert = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Binding:
    """One canonical tensor bound to the Paddle tensor holding it, with both conversions."""

    name: str  # canonical, e.g. "gru.kernel"
    tensor: paddle.Tensor  # the parameter or buffer
    trainable: bool
    to_native: Convert  # canonical layout -> Paddle layout
    to_canonical: Convert  # Paddle layout -> canonical layout


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _swap_first_two_blocks(a: np.ndarray, axis: int) -> np.ndarray:
    """[z | r | h] <-> [r | z | c] along ``axis`` (3H long): the swap is its own inverse."""
    first, second, third = np.split(a, 3, axis=axis)
    return np.concatenate([second, first, third], axis=axis)


def _gru_kernel_to_native(k: np.ndarray) -> np.ndarray:
    return _swap_first_two_blocks(k, axis=1).T  # (E, 3H) z|r|h -> (3H, E) r|z|c


def _gru_kernel_to_canonical(w: np.ndarray) -> np.ndarray:
    return _swap_first_two_blocks(w.T, axis=1)  # (3H, E) r|z|c -> (E, 3H) z|r|h


def _gru_bias(b: np.ndarray) -> np.ndarray:
    return _swap_first_two_blocks(b, axis=0)  # (3H,) z|r|h <-> r|z|c


def _bindings_of(op: object, m: nn.Layer) -> list[Binding]:
    if isinstance(op, (ops.Conv2D, ops.Dense)):
        out = [Binding(f"{op.name}.kernel", m.weight, True, _same, _same)]
        if op.bias:
            out.append(Binding(f"{op.name}.bias", m.bias, True, _same, _same))
        return out
    if isinstance(op, ops.BatchNorm):
        return [
            Binding(f"{op.name}.gamma", m.weight, True, _same, _same),
            Binding(f"{op.name}.beta", m.bias, True, _same, _same),
            Binding(f"{op.name}.mean", m._mean, False, _same, _same),
            Binding(f"{op.name}.var", m._variance, False, _same, _same),
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
            out.append(Binding(f"{op.name}.{role}_kernel", linear.weight, True, _same, _same))
            if linear.bias is not None:  # the key projection has none
                out.append(Binding(f"{op.name}.{role}_bias", linear.bias, True, _same, _same))
        return out
    raise AssertionError(f"no weight binding for {type(op).__name__}")  # lowering.Build.own


def bindings(owners: list[tuple[object, nn.Layer]]) -> dict[str, Binding]:
    """Every canonical name of the model -> its binding, in graph order (``owners``: the
    ``(op, layer)`` pairs that ``lowering.Build`` collected)."""
    return {b.name: b for op, m in owners for b in _bindings_of(op, m)}


def _np_dtype(t: paddle.Tensor) -> np.dtype:
    return np.dtype(str(t.dtype).rsplit(".", 1)[-1])


def load(binds: dict[str, Binding], params: dict[str, np.ndarray]) -> None:
    """Copy canonical ``params`` into the bound tensors (their dtype and place kept: in place,
    so the GRU's flat cuDNN-style weight list keeps pointing at them)."""
    with paddle.no_grad():
        for name, b in binds.items():
            native = b.to_native(np.asarray(params[name]))
            b.tensor.set_value(np.ascontiguousarray(native, dtype=_np_dtype(b.tensor)))


def read(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """Every bound tensor in canonical layout (fresh NumPy arrays, never views of the model)."""
    return {n: np.array(b.to_canonical(b.tensor.numpy()), order="C") for n, b in binds.items()}


def read_grads(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """The gradient of every trainable tensor in canonical layout (zeros where none flowed)."""
    out = {}
    for n, b in binds.items():
        if b.trainable:
            g = b.tensor.grad
            a = np.zeros(b.tensor.shape, _np_dtype(b.tensor)) if g is None else g.numpy()
            out[n] = np.array(b.to_canonical(a), order="C")
    return out
