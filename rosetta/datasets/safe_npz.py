"""Read ``.npz`` archives without ``allow_pickle=True``.

Plain arrays are read with ``numpy.lib.format.read_array(..., allow_pickle=False)``. For
object arrays (the Keras IMDB file stores each review as a Python list), the ``.npy``
header is parsed here and the pickled payload goes to :class:`safe_pickle.SafeUnpickler`,
which can rebuild arrays and lists but never call anything else.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from rosetta.datasets.safe_pickle import safe_load
from rosetta.errors import DataError

_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError)


def _read_member(zf: zipfile.ZipFile, name: str, path: Path, fix: str) -> np.ndarray:
    src = f"{path}:{name}.npy"
    try:
        with zf.open(name + ".npy") as fh:
            version = npy_format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = npy_format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            if not dtype.hasobject:
                count = int(np.prod(shape, dtype=np.int64))
                data = fh.read(count * dtype.itemsize)
                if len(data) != count * dtype.itemsize:
                    raise ValueError("array data is truncated")
                arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
                return arr.copy()
            # object array: a pickle follows the header; latin1 is NumPy's choice for
            # Python 2 pickles of arrays
            arr = safe_load(fh, source=src, encoding="latin1")
    except DataError:
        raise
    except _READ_ERRORS as exc:
        raise DataError(f"{src}: unreadable array ({type(exc).__name__}: {exc}); {fix}") from None
    if not isinstance(arr, np.ndarray) or arr.shape != tuple(shape):
        raise DataError(
            f"{src}: pickled payload is not the {shape} array its header declares; {fix}"
        )
    return arr


def read_npz(
    path: str | os.PathLike[str],
    names: tuple[str, ...],
    *,
    fix: str,
    optional: tuple[str, ...] = (),
) -> dict[str, np.ndarray]:
    """Read the arrays ``names`` (all required) and ``optional`` (if present) from an npz.

    Raises one-line :class:`DataError` ending with ``fix`` for a missing file, a damaged
    zip, missing arrays, or a pickle that references anything beyond plain data.
    """
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; {fix}") from None
    except _READ_ERRORS as exc:
        raise DataError(f"{path}: not a readable .npz archive ({exc}); {fix}") from None
    with zf:
        present = {n[:-4] for n in zf.namelist() if n.endswith(".npy")}
        missing = [n for n in names if n not in present]
        if missing:
            raise DataError(f"{path}: missing array(s) {missing} (found {sorted(present)}); {fix}")
        wanted = list(names) + [n for n in optional if n in present]
        return {n: _read_member(zf, n, path, fix) for n in wanted}
