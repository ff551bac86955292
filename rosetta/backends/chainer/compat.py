"""Chainer 7.8.1 on NumPy 2: the smallest compatibility layer that lets it import and run.

Chainer 7.8.1 (2020, the last release) predates NumPy 2, which removed two names Chainer reads.
Everything else Chainer needs from NumPy still exists. The layer, in full:

1. ``numpy.sctypes`` exists **only while ``import chainer`` runs** (then it is deleted again):
   ``chainer/functions/array/as_strided.py`` line 10 reads ``np.sctypes['int']`` at import time
   (``import chainer`` imports every function), so without it ``import chainer`` fails with
   ``AttributeError: np.sctypes was removed in the NumPy 2.0 release``. The value is NumPy 1.x's
   own table. No other module, and no other backend in the same process, sees it afterwards.
2. ``as_strided``'s module-global ``np`` becomes a proxy of NumPy that also carries that
   ``sctypes`` table: its backward reads ``np.sctypes['float']`` at call time (line 252).
3. ``resize_images.compute_indices_and_weights`` is re-created with globals in which ``numpy``
   is a proxy that also carries ``float`` (NumPy 1.x's alias of the builtin ``float``, removed
   in NumPy 1.24): its lines 179-196 build the interpolation grids with ``dtype=numpy.float``.
   Only that one function sees the proxy: the rest of the module tests ``xp is numpy`` to pick
   its CPU path, which a module-wide proxy would break. Rosetta does not call
   ``F.resize_images``; the line is here because Chainer users meet it, and it costs nothing
   outside that function.
4. Two warnings Chainer's import emits and that say nothing about Rosetta are silenced during
   the import only: ``numpy.distutils`` is deprecated (Chainer's environment check imports it)
   and ``pkg_resources`` is deprecated (hence ``setuptools<81``, pinned by the bootstrap).

The proxies forward every other attribute to the real NumPy module, so ``np.ndarray`` and the
rest are NumPy's own. Nothing here touches ``numpy`` outside the import window.
"""

from __future__ import annotations

import importlib
import types
import warnings

import numpy as np

__all__ = ["NUMPY_1_SCTYPES", "load", "applied"]

#: NumPy 1.x's ``numpy.sctypes`` (the scalar types grouped by kind), as Chainer 7 reads it
NUMPY_1_SCTYPES: dict[str, list[type]] = {
    "int": [np.int8, np.int16, np.int32, np.int64],
    "uint": [np.uint8, np.uint16, np.uint32, np.uint64],
    "float": [np.float16, np.float32, np.float64, np.longdouble],
    "complex": [np.complex64, np.complex128, np.clongdouble],
    "others": [bool, object, bytes, str, np.void],
}

_state: dict[str, object] = {}


class _NumPy1(types.ModuleType):
    """NumPy as one Chainer module expects it: NumPy 2 plus the few names given to it."""

    def __init__(self, **extra: object) -> None:
        super().__init__("numpy")
        self.__dict__.update(extra)

    def __getattr__(self, name: str) -> object:  # only called for names not set above
        return getattr(np, name)


def _with_globals(fn: types.FunctionType, **names: object) -> types.FunctionType:
    """``fn`` re-created over a copy of its module's globals with ``names`` replaced."""
    g = {**fn.__globals__, **names}
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__doc__ = fn.__doc__
    return new


def applied() -> dict[str, str]:
    """What the layer did in this process (empty before ``load``): for the manifest and tests."""
    return dict(_state.get("applied", {}))  # type: ignore[arg-type]


def load() -> types.ModuleType:
    """Import Chainer with the layer applied (once per process) and return the module."""
    if "chainer" in _state:
        return _state["chainer"]  # type: ignore[return-value]
    added = not hasattr(np, "sctypes")  # False only on NumPy 1.x, where nothing is needed
    if added:
        np.sctypes = NUMPY_1_SCTYPES  # 1. visible only during the import below
    try:
        with warnings.catch_warnings():  # 4.
            warnings.filterwarnings("ignore", message=r"(?s).*numpy\.distutils", category=Warning)
            warnings.filterwarnings("ignore", message=r"(?s).*pkg_resources", category=Warning)
            chainer = importlib.import_module("chainer")
            importlib.import_module("chainer.functions")
            importlib.import_module("chainer.links")
    finally:
        if added:
            del np.sctypes
    done: dict[str, str] = {}
    if added:
        done["numpy.sctypes"] = "during `import chainer` only (as_strided.py reads it at import)"
        mod = importlib.import_module("chainer.functions.array.as_strided")
        mod.np = _NumPy1(sctypes=NUMPY_1_SCTYPES)  # 2.
        done["as_strided.np.sctypes"] = "proxy of NumPy (as_strided backward reads it)"
    if not hasattr(np, "float"):
        mod = importlib.import_module("chainer.functions.array.resize_images")
        fn = mod.compute_indices_and_weights
        mod.compute_indices_and_weights = _with_globals(fn, numpy=_NumPy1(float=float))  # 3.
        done["resize_images.numpy.float"] = (
            "proxy of NumPy in compute_indices_and_weights only (NumPy 1.x alias of float)"
        )
    _state["applied"] = done
    _state["chainer"] = chainer
    return chainer
