"""Read a file of a run (record, ``run.json``, ``index.json``, a data-cache cut) safely.

A run folder is written by cells and may be edited, copied or tampered with; a name ending in
``.json`` may be a symlink to ``/dev/zero`` (endless bytes, size 0 by ``stat``) or a FIFO
(``open`` blocks until a writer comes). So the file is opened once, non-blocking (a FIFO
opens at once instead of waiting for a writer), checked on the *open descriptor*
(``fstat``: a regular file, within the size bound) and read from that descriptor, never
more than the bound: what is checked is what is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rosetta.userfile import kind


class NotARegularFile(ValueError):
    """The path is a device, FIFO, socket or folder (or a link to one), or is over its bound."""


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks to regular files are followed), at
    most ``limit`` of them. Raises :class:`NotARegularFile` for anything else or a larger file,
    ``OSError`` where the file cannot be opened or read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(f"not a regular file but {kind(st.st_mode)}")
        if st.st_size > limit:
            raise NotARegularFile(f"larger than {_size(limit)} ({_size(st.st_size)})")
        chunks, total = [], 0
        while True:  # read to the end, the file may have grown since fstat: never past the bound
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise NotARegularFile(f"larger than {_size(limit)} (grew while read)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``UnicodeDecodeError`` for other bytes)."""
    return read_bytes(path, limit).decode("utf-8")


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n} bytes"
