"""``rosetta data accept PATH``: check in a user's own copy of a data set as ``user-provided``.

Some users hold CIFAR-10 or IMDB whose bytes differ from the official checksum (re-packed, from
a mirror). Such a copy is checked by its contents (:mod:`copycheck`: format, counts, label
ranges, class balance), copied into the data directory under the official name unless it is
already there, and recorded in a sidecar ``<file>.rosetta.json`` with ``source:
user-provided`` and its own checksums. From then on it loads like any verified file and every
record, summary and report says ``user-provided``; a later change of a byte is refused.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from rosetta.datasets import registry
from rosetta.datasets.checksums import (
    OFFICIAL,
    USER_PROVIDED,
    file_digest,
    remove_sidecar,
    write_sidecar,
)
from rosetta.datasets.cifar10 import folder_sidecar_path
from rosetta.datasets.copycheck import CopyReport
from rosetta.datasets.paths import atomic_write, atomic_write_bytes
from rosetta.errors import DataError


@dataclass(frozen=True)
class Accepted:
    """The outcome of ``accept``: where the copy now is and which source it counts as."""

    dataset: str
    path: Path
    source: str  # "official" (the bytes were official after all) | "user-provided"
    digest: str  # "<algorithm>:<hex>"
    facts: tuple[str, ...]


def guess_dataset(path: Path) -> str:
    """The data set a path holds, from its name: ``*.tar.gz`` or a folder is CIFAR-10,
    ``*.npz`` is IMDB."""
    name = path.name.lower()
    if path.is_dir() or name.endswith((".tar.gz", ".tgz", ".tar")):
        return "cifar10"
    if name.endswith(".npz"):
        return "imdb"
    raise DataError(
        f"{path}: cannot tell which data set this is from its name; pass "
        f"--dataset {{{','.join(registry.file_datasets())}}}"
    )


def accept(
    path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | None = None,
    *,
    dataset: str | None = None,
    force: bool = False,
) -> Accepted:
    """Check ``path`` by its contents and install it in ``data_dir`` as ``user-provided``.

    A file is copied (atomically) to ``<data_dir>/<official name>`` unless it is that file; an
    extracted CIFAR-10 folder is accepted where it is (its parent is its data directory). An
    existing different file there is replaced only with ``force``. A copy whose checksum is the
    official one is installed as ``official`` without a sidecar. Raises one-line ``DataError``.
    """
    src = Path(path).expanduser().absolute()
    if not src.exists():
        raise DataError(f"{src}: no such file or folder to accept")
    if not src.is_dir() and not src.is_file():
        raise DataError(
            f"{src}: not a regular file or folder (a device, FIFO or socket); accept the data "
            "set's file itself"
        )
    entry = registry.get(dataset or guess_dataset(src))
    if entry.remote is None or entry.check_copy is None:
        raise DataError(f"{entry.name}: generated on the fly, there is nothing to accept")
    if src.is_dir():
        return _accept_folder(src, entry)
    remote = entry.remote
    target = entry.default_path(data_dir)
    digest = file_digest(src, remote.algorithm)
    official = digest == remote.digest
    report = None if official else entry.check_copy(src)
    if src != target.absolute():
        if target.exists() and not force and file_digest(target, remote.algorithm) != digest:
            raise DataError(
                f"{target}: a different {entry.title} file is already there; re-run with --force "
                "to replace it"
            )
        remove_sidecar(target)  # a stale sidecar must never vouch for the new bytes
        with open(src, "rb") as fh, atomic_write(target) as out:
            shutil.copyfileobj(fh, out, 1 << 20)
        if file_digest(target, remote.algorithm) != digest:
            raise DataError(f"{src}: changed while it was being copied; run accept again")
    if official:
        remove_sidecar(target)
        return Accepted(entry.name, target, OFFICIAL, f"{remote.algorithm}:{digest}", ())
    assert report is not None
    write_sidecar(target, _record(src, report))
    return Accepted(entry.name, target, USER_PROVIDED, f"{remote.algorithm}:{digest}", report.facts)


def _record(src: Path, report: CopyReport) -> dict:
    return {
        "source": USER_PROVIDED,
        "dataset": report.dataset,
        "sizes": report.sizes,
        "members": report.members,
        "checks": list(report.facts),
        "accepted_from": str(src),
        "accepted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _accept_folder(folder: Path, entry: registry.DatasetEntry) -> Accepted:
    """An extracted CIFAR-10 folder: checked, then vouched for by the folder sidecar."""
    if entry.name != "cifar10" or entry.check_copy is None:
        raise DataError(f"{folder}: {entry.title} is one file, not a folder")
    if folder.name != "cifar-10-batches-py":
        raise DataError(
            f"{folder}: an extracted CIFAR-10 folder must be named cifar-10-batches-py (it is "
            "looked up by that name in the data directory)"
        )
    report = entry.check_copy(folder)
    side = folder_sidecar_path(folder.parent)
    record = {**_record(folder, report), "file": folder.name, "synthetic": False}
    atomic_write_bytes(side, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    ver = entry.verify(folder) if entry.verify else None
    source = ver.source if ver else USER_PROVIDED
    return Accepted(entry.name, folder, source, "md5:per-file", report.facts)
