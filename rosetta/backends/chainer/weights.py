"""Canonical parameters <-> Chainer's links: the only place where layouts change.

``CONVERSIONS`` maps each parameter-owning op class to a pair of functions:

- ``to_native(op, params) -> {link attribute: array}`` (canonical NumPy in, Chainer's layout out);
- ``to_canonical(op, read) -> {canonical name: array}``, where ``read(attr)`` returns the link's
  array (or gradient) for that attribute, so parameters and gradients share one conversion.

``load`` and ``read`` apply them to a model's parameter owners (``lowering.Ctx.owners``, the
``(op, link)`` pairs of the lowered chain). Every conversion is a transpose, a slice or a
concatenation: exact in any dtype, so a ``set_params``/``get_params`` round trip returns the
same bits.

Layouts: Convolution2D ``W`` is OIHW (canonical, unchanged); Linear ``W`` is (out, in), the
transpose of the canonical IO kernel (rows of fc1 stay in the C, H, W flatten order because the
activations are NCHW); EmbedID ``W`` is VE (unchanged); BatchNormalization keeps ``gamma``,
``beta`` and the persistent ``avg_mean``, ``avg_var``. NStepGRU: see ``GATES``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rosetta.backends.chainer import compat
from rosetta.errors import BackendError
from rosetta.spec import ops

#: canonical gate blocks of the spec's GRU kernels (columns of ``kernel``/``recurrent_kernel``)
CANONICAL_GATES = ("z", "r", "h")
#: Chainer's NStepGRU index of each gate: input weights ``w{i}``/``b{i}``, recurrent weights
#: ``w{i+3}``/``b{i+3}`` (chainer.functions.n_step_gru: r uses W0/W3, z W1/W4, the candidate
#: W2/W5 with the reset gate applied to ``W5 h + b5``, i.e. reset_after)
GATES = {"r": 0, "z": 1, "h": 2}

Read = Callable[[str], np.ndarray]


def _conv_to_native(op: ops.Conv2D, p) -> dict:
    out = {"W": p[f"{op.name}.kernel"]}  # OIHW both sides
    if op.bias:
        out["b"] = p[f"{op.name}.bias"]
    return out


def _conv_to_canonical(op: ops.Conv2D, read: Read) -> dict:
    out = {f"{op.name}.kernel": read("W")}
    if op.bias:
        out[f"{op.name}.bias"] = read("b")
    return out


def _dense_to_native(op: ops.Dense, p) -> dict:
    out = {"W": p[f"{op.name}.kernel"].T}  # (I, O) -> Chainer's (O, I)
    if op.bias:
        out["b"] = p[f"{op.name}.bias"]
    return out


def _dense_to_canonical(op: ops.Dense, read: Read) -> dict:
    out = {f"{op.name}.kernel": read("W").T}  # (O, I) -> (I, O)
    if op.bias:
        out[f"{op.name}.bias"] = read("b")
    return out


_BN_ROLES = {"gamma": "gamma", "beta": "beta", "mean": "avg_mean", "var": "avg_var"}


def _bn_to_native(op: ops.BatchNorm, p) -> dict:
    return {attr: p[f"{op.name}.{role}"] for role, attr in _BN_ROLES.items()}


def _bn_to_canonical(op: ops.BatchNorm, read: Read) -> dict:
    return {f"{op.name}.{role}": read(attr) for role, attr in _BN_ROLES.items()}


def _embedding_to_native(op: ops.Embedding, p) -> dict:
    return {"W": p[f"{op.name}.table"]}  # (V, E) both sides


def _embedding_to_canonical(op: ops.Embedding, read: Read) -> dict:
    return {f"{op.name}.table": read("W")}


def _gru_to_native(op: ops.GRU, p) -> dict:
    h = op.units
    n = op.name
    out = {}
    for j, gate in enumerate(CANONICAL_GATES):
        cols = slice(j * h, (j + 1) * h)  # gate block j of the 3H axis
        i = GATES[gate]
        out[f"rnn.0.w{i}"] = p[f"{n}.kernel"][:, cols].T  # (E, H) -> (H, E)
        out[f"rnn.0.w{i + 3}"] = p[f"{n}.recurrent_kernel"][:, cols].T  # (H, H) -> (H, H)^T
        out[f"rnn.0.b{i}"] = p[f"{n}.bias_input"][cols]
        out[f"rnn.0.b{i + 3}"] = p[f"{n}.bias_recurrent"][cols]
    return out


def _gru_to_canonical(op: ops.GRU, read: Read) -> dict:
    n = op.name
    idx = [GATES[g] for g in CANONICAL_GATES]  # Chainer indices in z, r, h order
    return {
        # H x (H, E) transposed and side by side -> (E, 3H), blocks z | r | h
        f"{n}.kernel": np.concatenate([read(f"rnn.0.w{i}").T for i in idx], axis=1),
        f"{n}.recurrent_kernel": np.concatenate([read(f"rnn.0.w{i + 3}").T for i in idx], axis=1),
        f"{n}.bias_input": np.concatenate([read(f"rnn.0.b{i}") for i in idx]),
        f"{n}.bias_recurrent": np.concatenate([read(f"rnn.0.b{i + 3}") for i in idx]),
    }


def _layer_norm_to_native(op: ops.LayerNorm, p) -> dict:
    return {"gamma": p[f"{op.name}.gamma"], "beta": p[f"{op.name}.beta"]}


def _layer_norm_to_canonical(op: ops.LayerNorm, read: Read) -> dict:
    return {f"{op.name}.gamma": read("gamma"), f"{op.name}.beta": read("beta")}


def _position_to_native(op: ops.PositionEmbedding, p) -> dict:
    return {"table": p[f"{op.name}.table"]}


def _position_to_canonical(op: ops.PositionEmbedding, read: Read) -> dict:
    return {f"{op.name}.table": read("table")}


#: attention role -> the SelfAttention link's attribute (kernels IO <-> Linear.W (O, I))
_ATTENTION = {
    "query_kernel": "query.W", "query_bias": "query.b", "key_kernel": "key.W",
    "value_kernel": "value.W", "value_bias": "value.b", "output_kernel": "out_proj.W",
    "output_bias": "out_proj.b",
}  # fmt: skip


def _attention_to_native(op: ops.Attention, p) -> dict:
    return {
        path: p[f"{op.name}.{role}"].T if role.endswith("kernel") else p[f"{op.name}.{role}"]
        for role, path in _ATTENTION.items()
    }


def _attention_to_canonical(op: ops.Attention, read: Read) -> dict:
    return {
        f"{op.name}.{role}": read(path).T if role.endswith("kernel") else read(path)
        for role, path in _ATTENTION.items()
    }


#: the link attribute of each canonical parameter AdamW may decay, per op type
DECAY_PATHS: dict[type, Callable] = {
    ops.Dense: lambda op: {f"{op.name}.kernel": "W"},
    ops.Attention: lambda op: {
        f"{op.name}.{r}": path for r, path in _ATTENTION.items() if r.endswith("kernel")
    },
}

CONVERSIONS: dict[type, tuple[Callable, Callable]] = {
    ops.LayerNorm: (_layer_norm_to_native, _layer_norm_to_canonical),
    ops.PositionEmbedding: (_position_to_native, _position_to_canonical),
    ops.Attention: (_attention_to_native, _attention_to_canonical),
    ops.Conv2D: (_conv_to_native, _conv_to_canonical),
    ops.Dense: (_dense_to_native, _dense_to_canonical),
    ops.BatchNorm: (_bn_to_native, _bn_to_canonical),
    ops.Embedding: (_embedding_to_native, _embedding_to_canonical),
    ops.GRU: (_gru_to_native, _gru_to_canonical),
}


def attribute(link, path: str):
    """The link's parameter or persistent array at dotted ``path`` (``"rnn.0.w0"``, ``"W"``);
    a number indexes a ``ChainList`` (NStepGRU holds one link per layer)."""
    obj = link
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def to_native(op, params) -> dict[str, np.ndarray]:
    """Canonical arrays of ``op`` -> ``{link attribute path: array in Chainer's layout}``."""
    return CONVERSIONS[type(op)][0](op, params)


def to_canonical(op, read: Read) -> dict[str, np.ndarray]:
    """``op``'s arrays (via ``read(attribute path)``) -> canonical names and layouts."""
    return CONVERSIONS[type(op)][1](op, read)


def load(owners, params, dtype: str, device) -> None:
    """Write canonical ``params`` into the links of ``owners`` (``(op, link)`` pairs), in
    ``dtype`` on Chainer's ``device``; a shape mismatch is one ``BackendError``."""
    chainer = compat.load()
    for op, link in owners:
        for path, value in to_native(op, params).items():
            target = attribute(link, path)
            array = target.array if isinstance(target, chainer.Variable) else target
            if array.shape != value.shape:
                raise BackendError(f"chainer: {op.name} {path} is {array.shape}, got {value.shape}")
            array[...] = device.send(np.asarray(value, dtype=dtype))


def read(owners, *, grad: bool = False) -> dict[str, np.ndarray]:
    """Every parameter (or its gradient, ``grad=True``) of ``owners`` as canonical host arrays;
    buffers read as themselves."""
    chainer = compat.load()
    out: dict[str, np.ndarray] = {}
    for op, link in owners:

        def one(path: str, link=link) -> np.ndarray:
            target = attribute(link, path)
            if isinstance(target, chainer.Variable):
                target = target.grad if grad else target.array
            return np.array(chainer.backend.CpuDevice().send(target))  # a host copy

        out.update(to_canonical(op, one))
    return out
