"""Write pickles exactly as Python 2's ``cPickle`` (protocol 2) wrote the CIFAR-10 batches.

Python 3's pickler cannot produce Python 2 ``str`` opcodes: at protocol 2 it encodes
``bytes`` as a call to ``_codecs.encode`` on a unicode string (about 1.5x larger for
pixel data), and at protocol 3+ as ``BINBYTES``, which loaders that use
``pickle.load(f, encoding='latin1')`` (e.g. torchvision) would hand back as ``bytes`` keys.
The official files store keys and pixel data as Python 2 ``str`` (``SHORT_BINSTRING`` /
``BINSTRING``), so ``encoding='bytes'`` yields ``b'data'`` and ``encoding='latin1'`` yields
``'data'``. This tiny writer reproduces that, deterministically and without a memo.

Supported values: None, bool, int (32-bit), float, bytes/str (written as Python 2 ``str``,
str encoded as latin-1), list, tuple, dict, and C-contiguous numeric NumPy arrays (written
the way NumPy 1.x under Python 2 did: ``numpy.core.multiarray._reconstruct`` + ``BUILD``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

_PROTO2 = b"\x80\x02"
_MARK, _STOP, _NONE = b"(", b".", b"N"
_TRUE, _FALSE = b"\x88", b"\x89"
_EMPTY_DICT, _EMPTY_LIST, _EMPTY_TUPLE = b"}", b"]", b")"
_SETITEMS, _APPENDS, _TUPLE = b"u", b"e", b"t"
_TUPLES = {1: b"\x85", 2: b"\x86", 3: b"\x87"}
_REDUCE, _BUILD = b"R", b"b"
_BATCH = 1000  # items per APPENDS / SETITEMS, as CPython does


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode("ascii") + b"\n" + name.encode("ascii") + b"\n"


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def w(self, b: bytes) -> None:
        self.parts.append(b)

    def save(self, obj: Any) -> None:  # noqa: C901 - one branch per type is clearest
        if obj is None:
            self.w(_NONE)
        elif obj is True or obj is False:
            self.w(_TRUE if obj else _FALSE)
        elif isinstance(obj, (int, np.integer)):
            self._int(int(obj))
        elif isinstance(obj, float):
            self.w(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, (bytes, str)):
            self._str(obj.encode("latin-1") if isinstance(obj, str) else obj)
        elif isinstance(obj, list):
            self.w(_EMPTY_LIST)
            for i in range(0, len(obj), _BATCH):
                self.w(_MARK)
                for item in obj[i : i + _BATCH]:
                    self.save(item)
                self.w(_APPENDS)
        elif isinstance(obj, tuple):
            self._tuple(obj)
        elif isinstance(obj, dict):
            self.w(_EMPTY_DICT)
            items = list(obj.items())
            for i in range(0, len(items), _BATCH):
                self.w(_MARK)
                for k, v in items[i : i + _BATCH]:
                    self.save(k)
                    self.save(v)
                self.w(_SETITEMS)
        elif isinstance(obj, np.ndarray):
            self._ndarray(obj)
        else:
            raise TypeError(f"py2pickle cannot write {type(obj).__name__}")

    def _int(self, v: int) -> None:
        if 0 <= v < 0x100:
            self.w(b"K" + bytes([v]))
        elif 0 <= v < 0x10000:
            self.w(b"M" + struct.pack("<H", v))
        elif -(2**31) <= v < 2**31:
            self.w(b"J" + struct.pack("<i", v))
        else:
            raise ValueError(f"py2pickle: int {v} does not fit in 32 bits")

    def _str(self, b: bytes) -> None:
        if len(b) < 256:
            self.w(b"U" + bytes([len(b)]) + b)
        else:
            self.w(b"T" + struct.pack("<I", len(b)))
            self.w(b)

    def _tuple(self, t: tuple[Any, ...]) -> None:
        if not t:
            self.w(_EMPTY_TUPLE)
        elif len(t) in _TUPLES:
            for item in t:
                self.save(item)
            self.w(_TUPLES[len(t)])
        else:
            self.w(_MARK)
            for item in t:
                self.save(item)
            self.w(_TUPLE)

    def _ndarray(self, a: np.ndarray) -> None:
        if a.dtype.hasobject or not a.flags.c_contiguous:
            raise TypeError("py2pickle writes only C-contiguous numeric arrays")
        dt = a.dtype
        # _reconstruct(ndarray, (0,), 'b') then BUILD with the array state
        self.w(_global("numpy.core.multiarray", "_reconstruct"))
        self.w(_global("numpy", "ndarray"))
        self._tuple((0,))
        self._str(b"b")
        self.w(_TUPLES[3] + _REDUCE)
        # state = (version 1, shape, dtype, fortran_order, raw bytes)
        self.w(_MARK)
        self._int(1)
        self._tuple(tuple(int(s) for s in a.shape))
        # dtype('u1', 0, 1) then BUILD (3, '|', None, None, None, -1, -1, 0)
        self.w(_global("numpy", "dtype"))
        self._tuple((f"{dt.kind}{dt.itemsize}", 0, 1))
        self.w(_REDUCE)
        byteorder = "|" if dt.itemsize == 1 else ("<" if dt.byteorder in "<=" else ">")
        self._tuple((3, byteorder, None, None, None, -1, -1, 0))
        self.w(_BUILD)
        self.w(_FALSE)
        self._str(a.tobytes())
        self.w(_TUPLE + _BUILD)


def dumps_py2(obj: Any) -> bytes:
    """Serialise ``obj`` as a Python-2-style protocol-2 pickle (see module docstring)."""
    writer = _Writer()
    writer.w(_PROTO2)
    writer.save(obj)
    writer.w(_STOP)
    return b"".join(writer.parts)
