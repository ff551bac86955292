"""Writing a file at a path the user names (``rosetta export --onnx PATH``, ``--out`` of the
benchmarks): the one rule, checked once.

The path must be absent, or a regular file and ``--force`` given. Anything else is refused in one
line before a byte is written: a device (``/dev/null``, ``/dev/full``), a FIFO or a socket would
be *replaced* by a plain file by the rename that makes the write whole, a folder cannot be, and a
symlink would be replaced by a file where the user may expect its target to be written (so even
``--force`` refuses it: name the target itself). The write goes to a temporary file beside the
path, then one rename, so a reader never sees half a file; the path is checked again just before
the rename, so a device put there meanwhile is not replaced either.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from rosetta.errors import RosettaError

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words ("a FIFO", "a character device", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_target(path: Path, option: str, force: bool) -> None:
    """Refuse ``path`` (one line naming ``option``, the path and the fix) unless it is absent, or
    a regular file with ``force``. A symlink is refused whatever it points to."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise RosettaError(
                f"{option} {path}: the folder {folder} does not exist; create it first"
            ) from None
        return
    except OSError as exc:
        raise RosettaError(f"{option} {path}: cannot be checked ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise RosettaError(
            f"{option} {path}: is a symlink, which Rosetta does not replace or write through; "
            "name the file itself"
        )
    if not stat.S_ISREG(st.st_mode):
        what = kind(st.st_mode)
        example = f", e.g. {path / 'model.onnx'}" if stat.S_ISDIR(st.st_mode) else ""
        raise RosettaError(
            f"{option} {path}: is {what}, not a regular file; name a new file{example}"
        )
    if not force:
        raise RosettaError(f"{option} {path}: exists; add --force to overwrite it")


def write_user_file(path: str | os.PathLike[str], data: bytes, option: str, force: bool) -> Path:
    """Write ``data`` whole at ``path`` under the rule above; returns the path. A disk that
    refuses the write is one line naming the path and the cause."""
    path = Path(path)
    check_target(path, option, force)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)  # as a plain open() would make it, not mkstemp's 0600
            check_target(path, option, force)  # again: nothing put there meanwhile is replaced
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise RosettaError(
            f"{option} {path}: cannot write ({exc.strerror or exc}); nothing was written there"
        ) from None
    return path
