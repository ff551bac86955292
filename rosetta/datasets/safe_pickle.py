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


def _allowed_globals() -> dict[tuple[str, str], Any]:
    import _codecs

    ma = _multiarray()
    table: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _codecs.encode,
    }
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[(mod, "_reconstruct")] = ma._reconstruct
        table[(mod, "scalar")] = ma.scalar
    return table


class SafeUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` admits only the allow-list above."""

    def __init__(self, file: io.BufferedIOBase, *, source: str, encoding: str) -> None:
        super().__init__(file, encoding=encoding, fix_imports=True)
        self._source = source
        self._allowed = _allowed_globals()

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
) -> Any:
    """Unpickle from a binary file object or bytes with :class:`SafeUnpickler`.

    ``source`` names the file in error messages. Any failure (forbidden global, truncated
    or garbled stream) becomes a one-line :class:`DataError`.
    """
    if isinstance(fh, (bytes, bytearray, memoryview)):
        fh = io.BytesIO(fh)
    src = str(source)
    try:
        return SafeUnpickler(fh, source=src, encoding=encoding).load()
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - every unpickling failure means a bad file
        raise DataError(
            f"{src}: not a valid pickle ({type(exc).__name__}: {exc}); delete it and run "
            "`rosetta data fetch` or `rosetta data synth --force`"
        ) from None
