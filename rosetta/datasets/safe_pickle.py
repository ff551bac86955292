"""A restricted unpickler: data files may rebuild NumPy arrays and plain values, nothing else.

Both CIFAR-10 (pickled dicts) and the Keras IMDB ``.npz`` (object arrays) are pickles, and
unpickling a hostile file executes whatever its ``__reduce__`` names. :class:`SafeUnpickler`
resolves globals only from a fixed allow-list of *objects* (it never imports by name), so a
pickle that references ``os.system``, ``builtins.eval``, ``subprocess.Popen`` ... is refused
before anything runs.

What the formats actually reference (checked against NumPy 1.x/2.x and Python 2 pickles):

- a NumPy array: ``numpy.core.multiarray._reconstruct`` (NumPy 1 / Python 2 files) or
  ``numpy._core.multiarray._reconstruct`` (NumPy 2), ``numpy.ndarray``, ``numpy.dtype``;
- a NumPy scalar inside an object array: ``numpy.(_)core.multiarray.scalar``;
- ``bytes`` written by Python 3 at protocol <= 2: ``_codecs.encode``.

Lists, dicts, tuples, ints, floats and strings need no globals at all.

Allowed callables can still be abused for memory: ``_codecs.encode(x, 'hex_codec')`` doubles
its input (chained, a 4 KB file asked for 1.6 GB), and an array's state may declare a shape of
billions of elements (a 29 MB file asked for 44.7 GiB). So every allowed callable is wrapped:
``encode`` admits only ``latin1`` (what Python 3 writes for ``bytes`` at protocol <= 2), and
what each call would allocate (an encoded string, an array's elements, a scalar) is charged
against one budget per load *before* it is allocated; past it the load stops with one line.
"""

from __future__ import annotations

import io
import os
import pickle
from typing import Any

import numpy as np

from rosetta.errors import DataError


def _multiarray() -> Any:
    try:
        from numpy._core import multiarray  # NumPy >= 2 (and a shim in 1.26)
    except ImportError:  # pragma: no cover - NumPy < 1.26
        from numpy.core import multiarray  # type: ignore[no-redef]
    return multiarray


#: the budget of one load: MULTIPLIER x the pickle's bytes + FLOOR (an object array's pointers
#: are 8 bytes per element and each element costs at least one byte of pickle)
BUDGET_MULTIPLIER = 8
BUDGET_FLOOR = 16 * 2**20
_LATIN1 = ("latin1", "latin-1", "latin_1", "iso-8859-1", "iso8859-1", "l1")


class _Budget:
    """Bytes the allowed callables may still allocate during one load."""

    def __init__(self, limit: int, source: str):
        self.limit, self.left, self.source = limit, limit, source

    def charge(self, nbytes: int, what: str) -> None:
        self.left -= nbytes
        if self.left < 0:
            raise DataError(
                f"{self.source}: unpickling would allocate more than {self.limit:,} bytes "
                f"({what}): a memory bomb, not a data set; delete it and run "
                "`rosetta data fetch` or `rosetta data synth`"
            )


def _array_bytes(shape: Any, dtype: Any) -> int:
    """Bytes an array of ``shape`` and ``dtype`` takes (object arrays: one pointer each)."""
    count = 1
    for d in shape if isinstance(shape, tuple | list) else (shape,):
        count *= max(int(d), 0)
    return count * max(np.dtype(dtype).itemsize, 1)


def _allowed_globals(budget: _Budget) -> dict[tuple[str, str], Any]:
    import _codecs

    ma = _multiarray()

    class Guarded(np.ndarray):
        """An array whose state is charged to the budget before NumPy allocates it; turned
        back into a plain ``ndarray`` after the load."""

        def __setstate__(self, state: Any) -> None:
            if not isinstance(state, tuple) or len(state) not in (4, 5):
                raise ValueError("malformed array state")
            shape, dtype = state[-4], state[-3]
            budget.charge(_array_bytes(shape, dtype), f"an array of shape {shape}")
            np.ndarray.__setstate__(self, state)

    def encode(obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        if not isinstance(encoding, str) or encoding.lower() not in _LATIN1:
            raise DataError(
                f"{budget.source}: refusing _codecs.encode with {str(encoding)[:20]!r} (data "
                "pickles only use latin1; the file may be a memory bomb); delete it and run "
                "`rosetta data fetch` or `rosetta data synth`"
            )
        budget.charge(len(obj) if isinstance(obj, str | bytes) else 0, "an encoded string")
        return _codecs.encode(obj, encoding, errors)

    def reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
        budget.charge(_array_bytes(shape, dtype), f"an array of shape {shape}")
        return ma._reconstruct(Guarded, shape, dtype)

    def scalar(dtype: Any, *args: Any) -> Any:
        budget.charge(max(np.dtype(dtype).itemsize, 1), "a scalar")
        return ma.scalar(dtype, *args)

    table: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): encode,
    }
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[(mod, "_reconstruct")] = reconstruct
        table[(mod, "scalar")] = scalar
    return table


def _plain(obj: Any) -> Any:
    """The loaded object with its guarded arrays plain ``ndarray`` again: the object itself,
    dict values, and the arrays held by lists, tuples and object arrays (the elements of an
    IMDB object array are lists of ints: they are not walked)."""
    if isinstance(obj, np.ndarray):
        if type(obj) is not np.ndarray:
            obj = obj.view(np.ndarray)
        if obj.dtype.hasobject:
            flat = obj.reshape(-1)  # a view: elements replaced in place
            for i, x in enumerate(flat):
                if isinstance(x, np.ndarray | dict):
                    flat[i] = _plain(x)
        return obj
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple) and any(isinstance(x, np.ndarray | dict) for x in obj):
        return type(obj)(_plain(x) if isinstance(x, np.ndarray | dict) else x for x in obj)
    return obj


class SafeUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` admits only the allow-list above."""

    def __init__(
        self, file: io.BufferedIOBase, *, source: str, encoding: str, max_bytes: int
    ) -> None:
        super().__init__(file, encoding=encoding, fix_imports=True)
        self._source = source
        self._allowed = _allowed_globals(_Budget(max_bytes, source))

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise DataError(
                f"{self._source}: refusing to unpickle {module}.{name} (not a plain data "
                "type; the file may be malicious); delete it and run `rosetta data fetch` "
                "or `rosetta data synth`"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise DataError(
            f"{self._source}: refusing pickle persistent id; delete the file and run "
            "`rosetta data fetch` or `rosetta data synth`"
        )


def safe_load(
    fh: io.BufferedIOBase | bytes,
    *,
    source: str | os.PathLike[str],
    encoding: str = "bytes",
    size: int | None = None,
) -> Any:
    """Unpickle from a binary file object or bytes with :class:`SafeUnpickler`.

    ``source`` names the file in error messages; ``size`` is the pickle's length in bytes
    where ``fh`` cannot say (a zip member), and sets the allocation budget. Any failure
    (forbidden global, memory bomb, truncated or garbled stream) becomes a one-line
    :class:`DataError`.
    """
    if isinstance(fh, (bytes, bytearray, memoryview)):
        size = len(fh)
        fh = io.BytesIO(fh)
    if size is None:
        try:
            size = os.fstat(fh.fileno()).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            size = 64 * 2**20  # the largest member any reader here admits
    src = str(source)
    budget = BUDGET_MULTIPLIER * size + BUDGET_FLOOR
    try:
        return _plain(SafeUnpickler(fh, source=src, encoding=encoding, max_bytes=budget).load())
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - every unpickling failure means a bad file
        raise DataError(
            f"{src}: not a valid pickle ({type(exc).__name__}: {exc}); delete it and run "
            "`rosetta data fetch` or `rosetta data synth --force`"
        ) from None
