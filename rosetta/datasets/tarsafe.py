"""Reading and extracting tar archives without trusting their member names or sizes.

A tar member can be named ``/etc/passwd`` or ``../../.bashrc``, or be a symlink / hard
link / device node that a later member writes *through*. :func:`check_member` rejects all
of those; :func:`safe_extract` checks *every* member before writing anything, then writes
regular files only, each atomically, each proven to resolve inside the destination.

A few kilobytes of gzip can also stand for gigabytes of tar. :class:`TarLimits` bounds the
member count, each member's size (from its header, *before* its data is read or skipped) and
the total, and a name may appear only once, so a hostile archive is refused after reading
its headers, never after decompressing or allocating what they claim.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rosetta.datasets.paths import atomic_write, ensure_writable_dir
from rosetta.errors import DataError

# Everything that can go wrong while reading a damaged .tar.gz.
READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, ValueError)
_FIX = "delete it and run `rosetta data fetch` or `rosetta data synth --force`"


@dataclass(frozen=True)
class TarLimits:
    """Bounds checked on each member header before anything of the member is read."""

    max_members: int = 64
    max_member_bytes: int = 64 * 2**20
    max_total_bytes: int = 512 * 2**20
    member_bytes: Callable[[str], int | None] | None = None  # per-name bound (format sizes)
    # uncompressed / compressed size of the whole archive, checked once its members pass
    # RATIO_FLOOR bytes: data that compresses 1000:1 is a bomb, not a data set
    max_ratio: float = 20.0


RATIO_FLOOR = 1 << 20


DEFAULT_LIMITS = TarLimits()


def _refuse(archive: str | os.PathLike[str], what: str) -> DataError:
    return DataError(f"{archive}: {what}; refusing to read it - {_FIX}")


def _checked_members(
    tf: tarfile.TarFile, archive: str | os.PathLike[str], limits: TarLimits
) -> list[tarfile.TarInfo]:
    """Read the headers one by one, checking each before the next (which skips its data)."""
    members: list[tarfile.TarInfo] = []
    names: set[str] = set()
    total = 0
    while True:
        try:
            member = tf.next()
        except READ_ERRORS as exc:
            raise DataError(f"{archive}: truncated or corrupt archive ({exc}); {_FIX}") from None
        if member is None:
            return members
        name = check_member(member, archive)
        if len(members) >= limits.max_members:
            raise _refuse(archive, f"more than {limits.max_members} members")
        if name in names:
            raise _refuse(archive, f"duplicate member name {member.name!r}")
        names.add(name)
        bound = limits.member_bytes(name) if limits.member_bytes else None
        bound = limits.max_member_bytes if bound is None else min(bound, limits.max_member_bytes)
        if member.size > bound:
            raise _refuse(
                archive,
                f"member {member.name!r} declares {member.size:,} bytes, more than the "
                f"{bound:,} its format allows",
            )
        total += member.size
        if total > limits.max_total_bytes:
            raise _refuse(
                archive, f"members total more than {limits.max_total_bytes:,} bytes uncompressed"
            )
        members.append(member)
        if total > RATIO_FLOOR and total > limits.max_ratio * _file_size(archive):
            raise _refuse(
                archive,
                f"members expand more than {limits.max_ratio:g} times its size (a compression "
                "bomb, not a data set)",
            )


def _file_size(archive: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(archive)
    except OSError:
        return 0


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
def open_checked_tar(
    archive: str | os.PathLike[str], limits: TarLimits = DEFAULT_LIMITS
) -> Iterator[tarfile.TarFile]:
    """Open a (possibly compressed) tar archive after checking every member header.

    Names, types, duplicates, counts and sizes are checked header by header (``limits``);
    reading all headers up front also detects truncation before any data is used.
    """
    try:
        tf = tarfile.open(archive, mode="r:*")
    except READ_ERRORS as exc:
        raise DataError(f"{archive}: not a readable tar archive ({exc}); {_FIX}") from None
    try:
        _checked_members(tf, archive, limits)
        tf._loaded = True  # every header is read: getmember()/getmembers() need no more I/O
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


def safe_extract(
    archive: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    limits: TarLimits = DEFAULT_LIMITS,
) -> list[Path]:
    """Extract the regular files and directories of ``archive`` under ``dest``.

    All members are checked (:func:`check_member`) before the first byte is written, so a
    hostile archive writes nothing at all. Each file is written atomically and must
    resolve inside ``dest`` (this also defeats pre-existing symlinks in ``dest``).
    Returns the extracted file paths.
    """
    dest = ensure_writable_dir(dest).resolve()
    written: list[Path] = []
    with open_checked_tar(archive, limits) as tf:
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
