"""Reading and extracting tar archives without trusting their member names.

A tar member can be named ``/etc/passwd`` or ``../../.bashrc``, or be a symlink / hard
link / device node that a later member writes *through*. :func:`check_member` rejects all
of those; :func:`safe_extract` checks *every* member before writing anything, then writes
regular files only, each atomically, each proven to resolve inside the destination.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rosetta.datasets.paths import atomic_write, ensure_writable_dir
from rosetta.errors import DataError

# Everything that can go wrong while reading a damaged .tar.gz.
READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, ValueError)


def check_member(member: tarfile.TarInfo, archive: str | os.PathLike[str]) -> str:
    """Return the member's normalised relative name, or raise DataError if it is unsafe.

    Refused: absolute names, drive letters, backslashes, ``..`` components, NUL bytes,
    and any member that is not a regular file or a directory (symlinks, hard links,
    character/block devices, FIFOs).
    """
    name = member.name
    bad = None
    if not (member.isreg() or member.isdir()):
        kind = "symlink" if member.issym() else "hard link" if member.islnk() else "special file"
        bad = f"{kind} member {name!r}"
    elif "\x00" in name or "\\" in name:
        bad = f"member with an unsafe name {name!r}"
    elif name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        bad = f"absolute member path {name!r}"
    else:
        norm = posixpath.normpath(name)
        if norm == ".." or norm.startswith("../") or ".." in name.split("/"):
            bad = f"member path escaping the archive {name!r}"
    if bad is not None:
        raise DataError(
            f"{archive}: unsafe archive ({bad}); refusing to use it - delete it and run "
            "`rosetta data fetch` or `rosetta data synth --force`"
        )
    return posixpath.normpath(name)


@contextmanager
def open_checked_tar(archive: str | os.PathLike[str]) -> Iterator[tarfile.TarFile]:
    """Open a (possibly compressed) tar archive after checking every member name.

    Reading all headers up front also detects truncation before any data is used.
    """
    try:
        tf = tarfile.open(archive, mode="r:*")
    except READ_ERRORS as exc:
        raise DataError(
            f"{archive}: not a readable tar archive ({exc}); delete it and run "
            "`rosetta data fetch` or `rosetta data synth --force`"
        ) from None
    try:
        try:
            members = tf.getmembers()
        except READ_ERRORS as exc:
            raise DataError(
                f"{archive}: truncated or corrupt archive ({exc}); delete it and run "
                "`rosetta data fetch` or `rosetta data synth --force`"
            ) from None
        for m in members:
            check_member(m, archive)
        yield tf
    finally:
        tf.close()


def read_member(tf: tarfile.TarFile, name: str, archive: str | os.PathLike[str]) -> bytes:
    """The bytes of one regular-file member, with one-line errors for missing/damaged data."""
    try:
        member = tf.getmember(name)
    except KeyError:
        raise DataError(
            f"{archive}: member {name} is missing; delete the archive and run "
            "`rosetta data fetch` or `rosetta data synth --force`"
        ) from None
    check_member(member, archive)
    try:
        fh = tf.extractfile(member)
        data = fh.read() if fh is not None else None
    except READ_ERRORS as exc:
        raise DataError(
            f"{archive}: member {name} is truncated or corrupt ({exc}); delete the archive "
            "and run `rosetta data fetch` or `rosetta data synth --force`"
        ) from None
    if data is None or len(data) != member.size:
        raise DataError(
            f"{archive}: member {name} is not a complete regular file; delete the archive "
            "and run `rosetta data fetch` or `rosetta data synth --force`"
        )
    return data


def safe_extract(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> list[Path]:
    """Extract the regular files and directories of ``archive`` under ``dest``.

    All members are checked (:func:`check_member`) before the first byte is written, so a
    hostile archive writes nothing at all. Each file is written atomically and must
    resolve inside ``dest`` (this also defeats pre-existing symlinks in ``dest``).
    Returns the extracted file paths.
    """
    dest = ensure_writable_dir(dest).resolve()
    written: list[Path] = []
    with open_checked_tar(archive) as tf:
        for member in tf.getmembers():
            rel = check_member(member, archive)
            target = (dest / rel).resolve()
            if target != dest and dest not in target.parents:
                raise DataError(
                    f"{archive}: member {member.name!r} would be written outside {dest}; "
                    "refusing to extract it"
                )
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            data = read_member(tf, member.name, archive)
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(target) as fh:
                fh.write(data)
            written.append(target)
    return written
