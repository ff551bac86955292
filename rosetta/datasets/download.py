"""Download the official data files: progress on stderr, checksum verified, atomic write.

The download streams into a temporary file in the data directory while hashing; only a
file whose digest equals the official constant is renamed into place. A network failure,
an HTTP error or a wrong checksum leaves nothing behind and raises one-line DataError that
says how to place the file by hand.
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rosetta.datasets.checksums import (
    CIFAR10_ARCHIVE,
    IMDB_ARCHIVE,
    RemoteFile,
    file_digest,
    read_sidecar,
    remove_sidecar,
    sidecar_source,
)
from rosetta.datasets.paths import atomic_write, ensure_writable_dir, resolve_data_dir
from rosetta.errors import DataError

REMOTES: dict[str, RemoteFile] = {"cifar10": CIFAR10_ARCHIVE, "imdb": IMDB_ARCHIVE}
_CHUNK = 1 << 16


class Progress:
    """A plain-text progress line on a stream (carriage returns on a TTY, else every 10%)."""

    def __init__(self, label: str, total: int | None, stream: TextIO | None = None) -> None:
        self.label, self.total = label, total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self._last = -1

    def update(self, n: int) -> None:
        self.done += n
        mb = self.done / 1e6
        if self.total:
            pct = int(100 * self.done / self.total)
            step = pct if self.tty else pct // 10 * 10
            if step != self._last:
                self._last = step
                end = "\r" if self.tty else "\n"
                self.stream.write(f"{self.label}: {mb:.1f}/{self.total / 1e6:.1f} MB ({pct}%){end}")
        elif self.tty:
            self.stream.write(f"{self.label}: {mb:.1f} MB\r")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write(f"{self.label}: {self.done / 1e6:.1f} MB done\n")
        self.stream.flush()


def _offline(remote: RemoteFile, url: str, data_dir: Path, reason: str) -> DataError:
    return DataError(
        f"cannot download {url} ({reason}) - this machine looks offline; place "
        f"{remote.filename} ({remote.algorithm} {remote.digest}) by hand in {data_dir}, or "
        "run `rosetta data synth` for synthetic data in the same format"
    )


def fetch(
    remote: RemoteFile,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    url: str | None = None,
    force: bool = False,
    timeout: float = 60.0,
    progress: bool = True,
    opener: Callable[..., Any] = urllib.request.urlopen,
    stream: TextIO | None = None,
) -> Path:
    """Download ``remote`` into ``data_dir`` unless a verified official copy is present.

    ``url`` overrides ``remote.url`` (tests use ``file://``). A present synthetic file is
    replaced only with ``force=True``. Returns the path of the verified file.
    """
    data_dir = ensure_writable_dir(resolve_data_dir(data_dir))
    target = data_dir / remote.filename
    url = url or remote.url
    if target.exists() and not force:
        source = sidecar_source(read_sidecar(target))
        if source is not None:
            raise DataError(
                f"{target}: a {source} file is present; re-run with --force to replace it "
                "with the official download"
            )
        if file_digest(target, remote.algorithm) == remote.digest:
            return target
    try:
        response = opener(url, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise DataError(
            f"cannot download {url}: HTTP {exc.code} {exc.reason}; place {remote.filename} "
            f"by hand in {data_dir}"
        ) from None
    except (TimeoutError, urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise _offline(remote, url, data_dir, str(reason)) from None
    h = hashlib.new(remote.algorithm)
    with response:
        length = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        total = int(length) if length and str(length).isdigit() else remote.size
        bar = Progress(f"downloading {remote.filename}", total, stream) if progress else None
        try:
            with atomic_write(target) as out:
                while chunk := response.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
                    if bar:
                        bar.update(len(chunk))
                if h.hexdigest() != remote.digest:
                    raise DataError(
                        f"{url}: downloaded {remote.filename} has {remote.algorithm} "
                        f"{h.hexdigest()}, expected {remote.digest} (corrupt or changed "
                        f"download); nothing was written - retry, or place the file by hand "
                        f"in {data_dir}"
                    )
                remove_sidecar(target)  # the official file replaces a synthetic one
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            raise _offline(remote, url, data_dir, f"connection lost: {exc}") from None
        finally:
            if bar:
                bar.close()
    return target


def fetch_dataset(name: str, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> Path:
    """:func:`fetch` by dataset name ("cifar10" or "imdb")."""
    try:
        remote = REMOTES[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; choose one of {sorted(REMOTES)}") from None
    return fetch(remote, data_dir, **kwargs)
