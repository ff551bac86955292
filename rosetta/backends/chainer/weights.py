"""Canonical parameters <-> Chainer's links: the only place where layouts change.

Each parameter-owning op's module (``ops/<op>.py``) holds its conversion pair:

- ``to_native(op, params) -> {link attribute path: array}`` (canonical NumPy in, Chainer's layout
  out);
- ``to_canonical(op, read) -> {canonical name: array}``, where ``read(path)`` returns the link's
  array (or gradient) for that attribute, so parameters and gradients share one conversion;

and, for an op whose parameters AdamW may decay, ``decay_paths(op) -> {canonical name: link
attribute path}``. This file dispatches to them through ``source.OPS.module(op)`` and applies
them to a model's parameter owners (``lowering.Ctx.owners``, the ``(op, link)`` pairs of the
lowered chain): ``load`` and ``read``. Every conversion is a transpose, a slice or a
concatenation: exact in any dtype, so a ``set_params``/``get_params`` round trip returns the
same bits. The layouts themselves are in each op module's docstring.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.chainer import compat
from rosetta.backends.chainer.ops import Read
from rosetta.backends.chainer.source import OPS
from rosetta.errors import BackendError


def attribute(link, path: str):
    """The link's parameter or persistent array at dotted ``path`` (``"rnn.0.w0"``, ``"W"``);
    a number indexes a ``ChainList`` (NStepGRU holds one link per layer)."""
    obj = link
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def to_native(op, params) -> dict[str, np.ndarray]:
    """Canonical arrays of ``op`` -> ``{link attribute path: array in Chainer's layout}``."""
    return OPS.module(op).to_native(op, params)


def to_canonical(op, read: Read) -> dict[str, np.ndarray]:
    """``op``'s arrays (via ``read(attribute path)``) -> canonical names and layouts."""
    return OPS.module(op).to_canonical(op, read)


def decay_paths(op) -> dict[str, str]:
    """The link attribute path of each canonical parameter of ``op`` AdamW may decay (none for
    an op whose module defines no ``decay_paths``)."""
    paths = getattr(OPS.module(op), "decay_paths", None)
    return paths(op) if paths else {}


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
