"""Where data lives, and how files get there without ever looking valid half-written.

The data directory is, in order of precedence: an explicit path (``--data-dir``), the
environment variable ``ROSETTA_DATA_DIR``, or ``<repo root>/data``.

Every file this package writes goes through :func:`atomic_write`: the bytes go to a
temporary file in the *same* directory, are flushed and fsync'ed, and only then renamed
over the final name with :func:`os.replace` (atomic on POSIX and Windows). An interrupted
write leaves at most a ``.tmp-rosetta-<pid>-*`` file that no loader ever opens, and the next
write into that directory removes it once its process is gone (:func:`remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from rosetta.errors import DataError

ENV_VAR = "ROSETTA_DATA_DIR"
TEMP_PREFIX = ".tmp-rosetta-"
STALE_AFTER_S = 24 * 3600  # a temporary file this old is stale whatever its process id says


def repo_root() -> Path:
    """The directory that contains the ``rosetta`` package (the git checkout)."""
    import rosetta

    return Path(rosetta.__file__).resolve().parents[1]


def default_data_dir() -> Path:
    """``$ROSETTA_DATA_DIR`` if set and non-empty, else ``<repo root>/data``."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return repo_root() / "data"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Turn an optional user-supplied data directory into an absolute path (not created)."""
    path = default_data_dir() if data_dir is None else Path(data_dir).expanduser()
    return path.absolute()


def ensure_writable_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` if needed and prove it writable by creating a file in it.

    ``os.access`` is not enough (it says yes to root on a read-only mount), so this
    really creates and removes a temporary file. Raises one-line :class:`DataError`.
    """
    path = Path(path)
    fix = f"choose a writable directory with --data-dir or ${ENV_VAR}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(
            f"data directory {path} cannot be created ({exc.strerror or exc}); {fix}"
        ) from None
    if not path.is_dir():
        raise DataError(f"data directory {path} is not a directory; {fix}")
    try:
        probe_writable(path)
    except OSError as exc:
        raise DataError(
            f"data directory {path} is not writable ({exc.strerror or exc}); {fix}"
        ) from None
    return path


def probe_writable(path: str | os.PathLike[str]) -> None:
    """Create and remove a temporary file in ``path``; raises ``OSError`` if that fails
    (``os.access`` is not enough: it says yes to root on a read-only mount)."""
    fd, probe = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path)
    os.close(fd)
    os.unlink(probe)


@contextlib.contextmanager
def atomic_write(target: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a temporary file next to ``target``; on success rename it over ``target``.

    On any exception the temporary file is removed and ``target`` is untouched.
    """
    target = Path(target)
    ensure_writable_dir(target.parent)
    remove_stale_temps(target.parent)
    prefix = f"{TEMP_PREFIX}{os.getpid()}-{target.name}."
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_bytes(target: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically; returns ``target`` as a Path."""
    with atomic_write(target) as fh:
        fh.write(data)
    return Path(target)


def leftover_temp_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Temporary files of ours in ``directory`` (for ``data info``), live or stale."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(TEMP_PREFIX))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process (or not a pid we can ask about): leave it
    return True


def is_stale(temp: Path, now: float | None = None) -> bool:
    """True if ``temp`` (ours by name) belongs to no running process or is older than a day.

    The writer's process id is in the name (``.tmp-rosetta-<pid>-<target>.<random>``); names
    without one come from older versions and count as stale."""
    rest = temp.name[len(TEMP_PREFIX) :]
    pid_text = rest.split("-", 1)[0]
    try:
        age = (time.time() if now is None else now) - temp.stat().st_mtime
    except OSError:
        return False
    if age > STALE_AFTER_S or not pid_text.isdigit():
        return True
    return int(pid_text) != os.getpid() and not _pid_alive(int(pid_text))


def remove_stale_temps(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete our temporary files in ``directory`` whose writer is gone; returns them."""
    removed = []
    for temp in leftover_temp_files(directory):
        if temp.is_file() and is_stale(temp):
            with contextlib.suppress(OSError):
                temp.unlink()
                removed.append(temp)
    return removed
