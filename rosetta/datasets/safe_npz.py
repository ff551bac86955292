"""Read ``.npz`` archives without ``allow_pickle=True``.

Plain arrays are read with ``numpy.lib.format.read_array(..., allow_pickle=False)``. For
object arrays (the Keras IMDB file stores each review as a Python list), the ``.npy``
header is parsed here and the pickled payload goes to :class:`safe_pickle.SafeUnpickler`,
which can rebuild arrays and lists but never call anything else.

A zip can also stand for far more than its size. Before a member is read, its declared
uncompressed size is checked against :class:`NpzLimits` (per member, total, count, no duplicate
names), and a plain array's header must not claim more bytes than the member holds; zipfile
itself stops every member at its declared size.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from rosetta.datasets.safe_pickle import safe_load
from rosetta.errors import DataError

_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError)


@dataclass(frozen=True)
class NpzLimits:
    """Bounds checked on the zip's central directory before any member is decompressed."""

    max_members: int = 16
    # The official imdb.npz's x arrays are pickled lists of ~6 M word ranks of 2-5 bytes each
    # (~20 MB); an unpickled rank costs up to 36 bytes of memory, so this bound also bounds
    # what a hostile member can make the unpickler allocate (~0.8 GB at worst).
    max_member_bytes: int = 64 * 2**20
    max_total_bytes: int = 160 * 2**20
    # a member larger than RATIO_FLOOR may expand at most this many times (word-rank pickles
    # deflate about 2:1; a bomb of repeated values about 1000:1)
    max_ratio: float = 16.0


RATIO_FLOOR = 1 << 20


DEFAULT_LIMITS = NpzLimits()


def _check_directory(zf: zipfile.ZipFile, path: Path, fix: str, limits: NpzLimits) -> None:
    infos = zf.infolist()
    names = [i.filename for i in infos]
    if len(infos) > limits.max_members:
        raise DataError(f"{path}: more than {limits.max_members} members; refusing it - {fix}")
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise DataError(f"{path}: duplicate member name {dup!r}; refusing it - {fix}")
    for info in infos:
        if info.file_size > limits.max_member_bytes:
            raise DataError(
                f"{path}: member {info.filename!r} declares {info.file_size:,} bytes "
                f"uncompressed, more than {limits.max_member_bytes:,}; refusing it - {fix}"
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR and ratio > limits.max_ratio:
            raise DataError(
                f"{path}: member {info.filename!r} expands {ratio:.0f} times (more than "
                f"{limits.max_ratio:g}: a compression bomb, not a data set); refusing it - {fix}"
            )
    total = sum(i.file_size for i in infos)
    if total > limits.max_total_bytes:
        raise DataError(
            f"{path}: members total {total:,} bytes uncompressed, more than "
            f"{limits.max_total_bytes:,}; refusing it - {fix}"
        )


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
                count = 1
                for d in shape:
                    count *= int(d)
                if count * dtype.itemsize > zf.getinfo(name + ".npy").file_size:
                    raise ValueError(f"header claims {count * dtype.itemsize:,} bytes of data")
                data = fh.read(count * dtype.itemsize)
                if len(data) != count * dtype.itemsize:
                    raise ValueError("array data is truncated")
                arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
                return arr.copy()
            # object array: a pickle follows the header; latin1 is NumPy's choice for
            # Python 2 pickles of arrays
            size = zf.getinfo(name + ".npy").file_size
            arr = safe_load(fh, source=src, encoding="latin1", size=size)
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
    limits: NpzLimits = DEFAULT_LIMITS,
) -> dict[str, np.ndarray]:
    """Read the arrays ``names`` (all required) and ``optional`` (if present) from an npz.

    Raises one-line :class:`DataError` ending with ``fix`` for a missing file, a damaged
    zip, one beyond ``limits``, missing arrays, or a pickle that references anything beyond
    plain data.
    """
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; {fix}") from None
    except _READ_ERRORS as exc:
        raise DataError(f"{path}: not a readable .npz archive ({exc}); {fix}") from None
    with zf:
        _check_directory(zf, path, fix, limits)
        present = {n[:-4] for n in zf.namelist() if n.endswith(".npy")}
        missing = [n for n in names if n not in present]
        if missing:
            raise DataError(f"{path}: missing array(s) {missing} (found {sorted(present)}); {fix}")
        wanted = list(names) + [n for n in optional if n in present]
        return {n: _read_member(zf, n, path, fix) for n in wanted}
