"""Planted defects: the NumPy reference with one classic conversion or optimiser mistake each.

Each defect is a subclass of the reference model (or of one of its optimisers) that differs from
it in exactly the way a real lowering has been seen to go wrong. ``build(defect)`` returns a
``build(workload, params, dtype)`` for ``rosetta.runner.gate.run_gate``, so the gate and its
localisation are exercised exactly as in a cell. The reference the gate compares with stays the
unmodified ``numpy_ref``: nothing here patches shared code.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rosetta.backends import numpy_ref, runtime_for
from rosetta.backends.numpy_ref import nn, optim
from rosetta.backends.numpy_ref.lowering import TABLE
from rosetta.backends.numpy_ref.model import ReferenceModel
from rosetta.spec import ops


def _nhwc_rows(kernel: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """fc1's rows as an NHWC flatten orders them: the permutation a backend must apply."""
    c, h, w = chw
    return kernel.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)


def _swap_zr(a: np.ndarray) -> np.ndarray:
    """The z and r gate blocks exchanged along the last axis (blocks ordered z, r, h)."""
    z, r, h = np.split(a, 3, axis=-1)
    return np.concatenate([r, z, h], axis=-1)


class _EpsInSqrt(optim.Adam):
    """Adam with epsilon inside the square root: sqrt(v_hat + eps)."""

    def step(self, params, grads):
        for name, p, g in optim._pairs(params, grads):
            t = self.t.get(name, 0) + 1
            self.t[name] = t
            m = self.m.setdefault(name, np.zeros_like(p))
            v = self.v.setdefault(name, np.zeros_like(p))
            m[...] = self.beta1 * m + (1 - self.beta1) * g
            v[...] = self.beta2 * v + (1 - self.beta2) * g * g
            m_hat, v_hat = m / (1 - self.beta1**t), v / (1 - self.beta2**t)
            p -= self.lr * m_hat / np.sqrt(v_hat + self.eps)


class _KerasEps(optim.Adam):
    """Keras' placement: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t); w -= lr_t m / (sqrt(v) + eps)."""

    def step(self, params, grads):
        for name, p, g in optim._pairs(params, grads):
            t = self.t.get(name, 0) + 1
            self.t[name] = t
            m = self.m.setdefault(name, np.zeros_like(p))
            v = self.v.setdefault(name, np.zeros_like(p))
            m[...] = self.beta1 * m + (1 - self.beta1) * g
            v[...] = self.beta2 * v + (1 - self.beta2) * g * g
            lr_t = self.lr * np.sqrt(1 - self.beta2**t) / (1 - self.beta1**t)
            p -= lr_t * m / (np.sqrt(v) + self.eps)


class _AdamW(optim.Adam):
    """torch.optim.AdamW's decoupled weight decay 0.01 on top of the spec's Adam."""

    def step(self, params, grads):
        before = {k: params[k].copy() for k in grads}
        super().step(params, grads)
        for k, p0 in before.items():
            params[k] -= self.lr * 0.01 * p0


def _relu_half_at_zero(op, site, build):
    """ReLU whose gradient at exactly 0 is 0.5 (``jnp.maximum(x, 0)``'s convention)."""

    def relu_layer(x, ctx):
        y, cache = nn.relu_forward(x)
        return y, lambda dy: np.where(cache, dy, 0) + 0.5 * dy * (x == 0)

    return relu_layer


#: the size of ``kernel_entry_off``'s one wrong entry (conv3.kernel[0, 0, 0, 0])
KERNEL_ENTRY_OFF = 1e-4


def load_fault(defect: str, workload, params: dict) -> dict:
    """``params`` as a backend with ``defect`` at its ``set_params`` boundary would load them
    (the layout and loading defects; the others are returned unchanged). Only tensors the
    (possibly cut) workload holds are touched: a prefix or suffix without the faulty op is clean,
    as it would be in a backend."""
    p = dict(params)
    if defect == "fc1_no_permutation" and "fc1.kernel" in params:
        chw = _flatten_input(workload)
        if chw is not None:  # a suffix cut at fc1 has no flatten before it: nothing to permute
            p["fc1.kernel"] = _nhwc_rows(np.asarray(params["fc1.kernel"]), chw)
    if defect == "gru_zr_swapped" and "gru.kernel" in params:
        for k in ("gru.kernel", "gru.recurrent_kernel", "gru.bias_input", "gru.bias_recurrent"):
            p[k] = _swap_zr(np.asarray(params[k]))
    if defect == "bn_mean_var_swapped":
        for k in params:
            if k.endswith(".mean"):
                base = k[: -len(".mean")]
                p[k], p[base + ".var"] = params[base + ".var"], params[k]
    if defect == "value_kernel_transposed" and "block.0.attn.value_kernel" in params:
        p["block.0.attn.value_kernel"] = np.ascontiguousarray(params["block.0.attn.value_kernel"].T)
    if defect == "kernel_entry_off" and "conv3.kernel" in params:
        k = np.array(params["conv3.kernel"], dtype=params["conv3.kernel"].dtype)
        k[0, 0, 0, 0] += KERNEL_ENTRY_OFF
        p["conv3.kernel"] = k
    return p


class Planted(ReferenceModel):
    """The reference with ``defect`` planted (see ``DEFECTS``)."""

    backend = "planted"
    defect = ""

    def set_params(self, params):
        w = self.workload
        super().set_params(load_fault(self.defect, w, params))
        o = w.optimizer
        if o is None:
            return
        if self.defect == "adam_eps_in_sqrt":
            self.optimizer = _EpsInSqrt(o.lr, o.beta1, o.beta2, o.eps)
        if self.defect == "adam_keras_eps":
            self.optimizer = _KerasEps(o.lr, o.beta1, o.beta2, o.eps)
        if self.defect == "adamw":
            self.optimizer = _AdamW(o.lr, o.beta1, o.beta2, o.eps)
        if self.defect == "momentum_0.5":
            self.optimizer = optim.SGD(lr=o.lr, momentum=0.5, nesterov=o.nesterov)


def _flatten_input(w) -> tuple[int, int, int] | None:
    """The per-sample input (C, H, W) of the flatten right before fc1 (None: fc1 has none)."""
    shape = prev = w.input.shape
    last = None
    for node in w.graph:
        if getattr(node, "name", "") == "fc1":
            return tuple(prev) if isinstance(last, ops.Flatten) and len(prev) == 3 else None
        prev, shape, last = shape, node.out_shape(shape), node
    raise ValueError("no fc1")


DEFECTS = (
    "fc1_no_permutation",
    "gru_zr_swapped",
    "adam_eps_in_sqrt",
    "adam_keras_eps",
    "adamw",
    "momentum_0.5",
    "bn_mean_var_swapped",
    "relu_half_at_zero",
    "kernel_entry_off",
    "value_kernel_transposed",
)


#: the defects planted in every real backend, at its ``set_params`` boundary (``into``)
LOAD_DEFECTS = ("fc1_no_permutation", "gru_zr_swapped", "kernel_entry_off")


def read_fault(defect: str, workload, params: dict) -> dict:
    """What ``get_params`` of a backend with ``defect`` returns for the arrays it holds: a
    layout mistake is made both ways (the same wrong conversion undone on the way back, so the
    round trip is exact and only the computation shows it); a wrong entry is read back as held."""
    p = dict(params)
    if defect == "fc1_no_permutation" and "fc1.kernel" in params:
        chw = _flatten_input(workload)
        if chw is not None:
            c, h, w = chw
            # (H*W*C, O) -> (H, W, C, O) -> (C, H, W, O) -> (C*H*W, O): _nhwc_rows undone
            k = np.asarray(params["fc1.kernel"])
            p["fc1.kernel"] = k.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)
    if defect == "gru_zr_swapped" and "gru.kernel" in params:
        for k in ("gru.kernel", "gru.recurrent_kernel", "gru.bias_input", "gru.bias_recurrent"):
            p[k] = _swap_zr(np.asarray(params[k]))
    return p


def plant(model, defect: str, workload):
    """``model`` (a real backend's, holding nothing yet) with the loading ``defect`` at its
    ``set_params``/``get_params`` boundary, as instance attributes (nothing shared is patched;
    ``unplant`` removes them)."""
    assert defect in LOAD_DEFECTS, defect
    clean_set, clean_get = model.set_params, model.get_params
    model.set_params = lambda p: clean_set(load_fault(defect, workload, p))
    model.get_params = lambda: read_fault(defect, workload, clean_get())
    return model


def unplant(model) -> None:
    """Remove ``plant``'s attributes: the model's own loading boundary again."""
    for name in ("set_params", "get_params"):
        model.__dict__.pop(name, None)


def into(backend: str, defect: str):
    """``build(workload, params, dtype) -> Model`` of the real ``backend`` with the loading
    ``defect`` planted (``plant``): fc1's rows in the wrong order, the z and r gate blocks
    exchanged, one conv3 kernel entry off. Everything else is the backend's own."""
    from rosetta.backends import make as make_model

    def make(workload, params, dtype):
        model = plant(make_model(backend, workload, params, dtype=dtype), defect, workload)
        model.set_params(params)
        return model

    return make


def build(defect: str):
    """``build(workload, params, dtype) -> Model`` of the reference with ``defect`` planted."""
    assert defect in DEFECTS, defect
    table = TABLE
    if defect == "relu_half_at_zero":
        table = dataclasses.replace(TABLE, entries={**TABLE.entries, ops.ReLU: _relu_half_at_zero})
    cls = type(f"Planted_{defect}", (Planted,), {"defect": defect, "table": table})

    def make(workload, params, dtype):
        return cls(workload, params, runtime_for(numpy_ref, dtype=dtype))

    return make
