"""Checksums: the official constants, streaming digests, and the sidecars that vouch for others.

A data file is trusted only if its digest equals the official constant *or* the digest
recorded in its sidecar ``<file>.rosetta.json``, written either by the synthetic generators
(source ``synthetic``) or by ``rosetta data accept`` after checking a user's own copy of the
data set (source ``user-provided``). Anything else - a truncated download, a flipped byte, a
stale synthetic file, a copy nobody checked - is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.datasets.paths import atomic_write_bytes
from rosetta.errors import DataError

SIDECAR_SUFFIX = ".rosetta.json"
#: the data sources a loader reports (``generated``: the random ResNet-50 images, no file)
OFFICIAL, USER_PROVIDED, SYNTHETIC, GENERATED = (
    "official",
    "user-provided",
    "synthetic",
    "generated",
)
SOURCES = (OFFICIAL, USER_PROVIDED, SYNTHETIC, GENERATED)
SIDECAR_VERSION = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One official data file: where it comes from and what it must hash to."""

    filename: str
    url: str
    algorithm: str  # "md5" | "sha256"
    digest: str
    size: int | None = None
    dataset: str = ""  # the name `rosetta data --dataset` knows it by

    @property
    def how_to_get(self) -> str:
        """The fix for a missing file: the commands that make it, or where to get it by hand."""
        return (
            f"run `rosetta data synth --dataset {self.dataset}` (synthetic) or `rosetta data fetch "
            f"--dataset {self.dataset}`, or place {self.filename} (from {self.url}) "
            "in the data directory by hand"
        )

    @property
    def fix_corrupt(self) -> str:
        """The fix for a corrupt, modified or unverifiable file."""
        return (
            f"delete it and run `rosetta data fetch --dataset {self.dataset}` or "
            f"`rosetta data synth --dataset {self.dataset} --force`; if it is your own copy "
            f"of the data set, check it in with `rosetta data accept PATH`"
        )

    def hint(self, data_dir: str | os.PathLike[str] | None) -> str:
        """``how_to_get`` with ``--data-dir`` spelled out when ``data_dir`` is not the default."""
        return with_data_dir(self.how_to_get, data_dir)

    def fix_hint(self, data_dir: str | os.PathLike[str] | None) -> str:
        """``fix_corrupt`` with ``--data-dir`` spelled out when ``data_dir`` is not the default."""
        return with_data_dir(self.fix_corrupt, data_dir)


def with_data_dir(text: str, data_dir: str | os.PathLike[str] | None) -> str:
    """Add ``--data-dir DIR`` to every ``rosetta data ...`` command in ``text`` unless ``data_dir``
    is the default data directory (then the commands work as written)."""
    from rosetta.datasets.paths import default_data_dir, resolve_data_dir

    resolved = resolve_data_dir(data_dir)
    if resolved == default_data_dir().absolute():
        return text
    for cmd in ("synth", "fetch", "accept PATH"):
        text = text.replace(f"`rosetta data {cmd}", f"`rosetta data {cmd} --data-dir {resolved}")
    return text


CIFAR10_ARCHIVE = RemoteFile(
    filename="cifar-10-python.tar.gz",
    url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    algorithm="md5",
    digest="c58f30108f718f92721af3b95e74349a",
    size=170_498_071,
    dataset="cifar10",
)

IMDB_ARCHIVE = RemoteFile(
    filename="imdb.npz",
    url="https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz",
    algorithm="sha256",
    digest="69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f",
    size=None,
    dataset="imdb",
)

CIFAR10_FOLDER = "cifar-10-batches-py"

# MD5 of each file of the official archive once extracted (as published by torchvision).
CIFAR10_MEMBER_MD5: dict[str, str] = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}


@dataclass(frozen=True)
class Verification:
    """Outcome of checking one file (or folder) against official and sidecar digests."""

    path: str
    algorithm: str
    digest: str
    source: str  # "official" | "user-provided" | "synthetic"
    sidecar: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def synthetic(self) -> bool:
        """True if the file was made by ``rosetta data synth``."""
        return self.source == "synthetic"


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks (never the whole file in memory)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_digests(path: str | os.PathLike[str], algorithms: tuple[str, ...]) -> dict[str, str]:
    """Several digests of one file in a single pass."""
    hs = {a: hashlib.new(a) for a in algorithms}
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            for h in hs.values():
                h.update(chunk)
    return {a: h.hexdigest() for a, h in hs.items()}


def bytes_digest(data: bytes, algorithm: str = "md5") -> str:
    """Hex digest of an in-memory byte string."""
    return hashlib.new(algorithm, data).hexdigest()


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """``<file>.rosetta.json`` next to ``path``."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def sidecar_source(side: dict[str, Any] | None) -> str | None:
    """The source a sidecar vouches for (``synthetic`` or ``user-provided``), else None."""
    if not side:
        return None
    if side.get("source") == USER_PROVIDED:
        return USER_PROVIDED
    if side.get("synthetic") is True:
        return SYNTHETIC
    return None


def read_sidecar(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The sidecar of ``path`` as a dict, or None if absent or unreadable."""
    side = sidecar_path(path)
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_sidecar(path: str | os.PathLike[str], info: dict[str, Any]) -> Path:
    """Record the digests of a freshly written synthetic file (atomically); ``info`` may set
    ``source`` to ``user-provided`` (then ``synthetic`` is false)."""
    digests = file_digests(path, ("md5", "sha256"))
    source = info.get("source", SYNTHETIC)
    record = {
        "synthetic": source == SYNTHETIC,
        "source": source,
        "generator": "rosetta",
        "sidecar_version": SIDECAR_VERSION,
        "file": Path(path).name,
        "size_bytes": os.path.getsize(path),
        **digests,
        **info,
    }
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    return atomic_write_bytes(sidecar_path(path), text.encode("utf-8"))


def remove_sidecar(path: str | os.PathLike[str]) -> None:
    """Delete the sidecar of ``path`` if any (before the file itself is replaced)."""
    try:
        sidecar_path(path).unlink()
    except FileNotFoundError:
        pass


def _refuse(path: Path, what: str, fix: str) -> DataError:
    return DataError(f"{path}: {what}; {fix}")


def verify_file(path: str | os.PathLike[str], remote: RemoteFile, *, fix: str) -> Verification:
    """Check ``path`` against the official digest of ``remote`` or the digest its sidecar
    vouches for (synthetic or user-provided).

    Raises :class:`DataError` (one line, ending with ``fix``) if the file is missing or
    its digest matches neither.
    """
    path = Path(path)
    if not path.is_file():
        raise _refuse(path, "file not found", fix)
    digest = file_digest(path, remote.algorithm)
    if digest == remote.digest:
        return Verification(str(path), remote.algorithm, digest, OFFICIAL)
    side = read_sidecar(path)
    source = sidecar_source(side)
    if source is not None and side is not None and side.get(remote.algorithm) == digest:
        return Verification(str(path), remote.algorithm, digest, source, side)
    if source is not None:
        what = f"{remote.algorithm} {digest} does not match its {source} sidecar (corrupt or stale)"
    elif remote.size is not None and path.stat().st_size != remote.size:
        what = (
            f"size {path.stat().st_size} bytes is not the official {remote.size} and "
            "no synthetic sidecar vouches for it (truncated or wrong file)"
        )
    else:
        what = f"{remote.algorithm} {digest} matches neither the official checksum nor a sidecar"
    raise _refuse(path, what, fix)
