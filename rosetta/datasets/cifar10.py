"""CIFAR-10 in its official "python version" format, real or synthetic.

On disk (in the data directory) either the archive ``cifar-10-python.tar.gz`` (preferred;
members are read straight from it, nothing is extracted) or the extracted folder
``cifar-10-batches-py/``. Inside: ``data_batch_1`` .. ``data_batch_5``, ``test_batch`` and
``batches.meta``, each a Python 2 protocol-2 pickle of a dict with bytes keys.
``b'data'`` is uint8 ``(n, 3072)``: per image the 1024 red, then green, then blue values,
each plane row-major 32x32. ``b'labels'`` is a list of ints in 0..9.

Every file is verified before use: the archive against the official MD5 or its sidecar
(synthetic, or a user's copy checked in by ``rosetta data accept``), the folder file by file
against the official per-file MD5s or the folder sidecar ``cifar-10-batches-py.rosetta.json``.
All pickles go through :mod:`safe_pickle`; archive members are size-checked from their headers
against the format (:data:`ARCHIVE_LIMITS`) before a byte of them is read. Dict keys may be
bytes (as in the official files) or str (as a Python 3 re-pickle writes them), in every file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rosetta.datasets import tarsafe
from rosetta.datasets.checksums import (
    CIFAR10_ARCHIVE,
    CIFAR10_FOLDER,
    CIFAR10_MEMBER_MD5,
    OFFICIAL,
    Verification,
    bytes_digest,
    read_sidecar,
    sidecar_source,
    verify_file,
)
from rosetta.datasets.paths import atomic_write_bytes, resolve_data_dir
from rosetta.datasets.safe_pickle import safe_load
from rosetta.errors import DataError

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
META_FILE = "batches.meta"
MEMBER_FILES = (*TRAIN_FILES, TEST_FILE, META_FILE)
LABEL_NAMES = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
SYNTHETIC_KEY = b"rosetta_synthetic"
LAYOUTS = ("NCHW", "NHWC")

HOW_TO_GET = CIFAR10_ARCHIVE.how_to_get
FIX_CORRUPT = CIFAR10_ARCHIVE.fix_corrupt
OFFICIAL_SIZES = {"train": 50000, "test": 10000}
BATCH_IMAGES = 10000  # the most images one official batch file holds
# A batch pickle: 3072 pixel bytes per image plus its label and file name (~40 bytes) and a
# few hundred bytes of dict; the official files are 31,035,704 (data_batch_*) bytes.
MAX_BATCH_BYTES = BATCH_IMAGES * (3072 + 128) + 65536
MAX_SMALL_BYTES = 1 << 20  # batches.meta (158 bytes official), readme.html


def _member_bound(name: str) -> int:
    base = name.rsplit("/", 1)[-1]
    return MAX_BATCH_BYTES if base in (*TRAIN_FILES, TEST_FILE) else MAX_SMALL_BYTES


#: the bounds an archive in this format must respect (checked from the tar headers).
ARCHIVE_LIMITS = tarsafe.TarLimits(
    max_members=16,
    max_member_bytes=MAX_BATCH_BYTES,
    max_total_bytes=6 * MAX_BATCH_BYTES + 4 * MAX_SMALL_BYTES,
    member_bytes=_member_bound,
    max_ratio=8.0,  # pixels hardly compress: the official archive expands 1.05 times
)


@dataclass(frozen=True, eq=False)  # arrays: compare fields explicitly
class CifarData:
    """CIFAR-10 as float32 arrays in [0, 1] (uint8 / 255) plus where they came from.

    ``x_*`` are ``(N, 3, 32, 32)`` for layout ``NCHW`` or ``(N, 32, 32, 3)`` for ``NHWC``;
    ``y_*`` are int32 ``(N,)`` in 0..9.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    layout: str
    source: str  # "official" | "user-provided" | "synthetic"
    checksum: Verification
    label_names: tuple[str, ...] = LABEL_NAMES
    synthetic_info: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def synthetic(self) -> bool:
        """True if the data was made by ``rosetta data synth``."""
        return self.source == "synthetic"


def archive_path(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of ``cifar-10-python.tar.gz`` in the data directory."""
    return resolve_data_dir(data_dir) / CIFAR10_ARCHIVE.filename


def folder_path(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the extracted ``cifar-10-batches-py/`` folder in the data directory."""
    return resolve_data_dir(data_dir) / CIFAR10_FOLDER


def folder_sidecar_path(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Sidecar recording per-file MD5s of an extracted synthetic folder."""
    return resolve_data_dir(data_dir) / (CIFAR10_FOLDER + ".rosetta.json")


def verify_cifar10_archive(path: str | os.PathLike[str]) -> Verification:
    """MD5 of the archive must be the official one or the one in its synthetic sidecar."""
    return verify_file(path, CIFAR10_ARCHIVE, fix=FIX_CORRUPT)


def verify_cifar10_folder(folder: str | os.PathLike[str]) -> Verification:
    """Check each file of an extracted folder against official or sidecar per-file MD5s."""
    folder = Path(folder)
    side = read_sidecar(folder) or {}
    side_source = sidecar_source(side)
    side_md5 = side.get("members", {}) if side_source else {}
    sources = set()
    for name in MEMBER_FILES:
        path = folder / name
        if not path.is_file():
            raise DataError(f"{path}: file not found; {CIFAR10_ARCHIVE.hint(folder.parent)}")
        if path.stat().st_size > _member_bound(name):
            raise DataError(
                f"{path}: {path.stat().st_size:,} bytes, more than the {_member_bound(name):,} "
                f"the format allows; {CIFAR10_ARCHIVE.fix_hint(folder.parent)}"
            )
        digest = bytes_digest(path.read_bytes(), "md5")
        if digest == CIFAR10_MEMBER_MD5[name]:
            sources.add(OFFICIAL)
        elif side_md5.get(name) == digest:
            sources.add(side_source)
        else:
            raise DataError(
                f"{path}: md5 {digest} matches neither the official checksum nor a sidecar "
                f"(corrupt or modified); {CIFAR10_ARCHIVE.fix_hint(folder.parent)}"
            )
    if len(sources) != 1:
        raise DataError(
            f"{folder}: mixes files of different sources ({', '.join(sorted(sources))}); "
            f"{CIFAR10_ARCHIVE.fix_hint(folder.parent)}"
        )
    source = sources.pop()
    return Verification(str(folder), "md5", "per-file", source, side if side_md5 else {})


def _keys(obj: Any, source: str, what: str) -> dict[bytes, Any]:
    """A pickled dict with its keys as bytes, whether they were written as bytes or as str."""
    if not isinstance(obj, dict):
        raise DataError(
            f"{source}: expected a pickled dict ({what}), got {type(obj).__name__}; {FIX_CORRUPT}"
        )
    out: dict[bytes, Any] = {}
    for k, v in obj.items():
        key = k.encode("latin-1") if isinstance(k, str) else k
        if isinstance(key, bytes):
            out[key] = v
    return out


def _batch_arrays(obj: Any, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate one unpickled batch dict; return uint8 (n, 3072) data and int32 labels."""
    fix = FIX_CORRUPT
    keys = _keys(obj, source, "a batch")
    missing = [k.decode() for k in (b"data", b"labels") if k not in keys]
    if missing:
        found = sorted(k.decode("latin-1") for k in keys if isinstance(k, bytes))
        raise DataError(f"{source}: missing key(s) {missing} (found {found}); {fix}")
    data, labels = keys[b"data"], keys[b"labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2:
        raise DataError(f"{source}: 'data' must be a uint8 (n, 3072) array; {fix}")
    if data.shape[1] != 3072:
        raise DataError(f"{source}: 'data' has shape {data.shape}, expected (n, 3072); {fix}")
    try:
        y = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError):
        raise DataError(f"{source}: 'labels' is not a list of integers; {fix}") from None
    if y.shape != (data.shape[0],):
        raise DataError(f"{source}: {y.size} labels for {data.shape[0]} images; {fix}")
    if y.size and (y.min() < 0 or y.max() > 9):
        raise DataError(f"{source}: labels outside 0..9; {fix}")
    return data, y.astype(np.int32)


def _meta(obj: Any, source: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    keys = _keys(obj, source, "batches.meta")
    raw_names = keys.get(b"label_names")
    if not isinstance(raw_names, (list, tuple)):
        raise DataError(f"{source}: batches.meta lacks a list 'label_names'; {FIX_CORRUPT}")
    names = tuple(n.decode("latin-1") if isinstance(n, bytes) else str(n) for n in raw_names)
    if len(names) != 10:
        raise DataError(f"{source}: expected 10 label names, got {len(names)}; {FIX_CORRUPT}")
    raw = keys.get(SYNTHETIC_KEY) or {}
    info = {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else v
        )
        for k, v in (raw.items() if isinstance(raw, dict) else [])
    }
    return names, info


def _to_float(data: np.ndarray, layout: str) -> np.ndarray:
    n = data.shape[0]
    x = data.reshape(n, 3, 32, 32)  # (n, 3072) -> (n, C, H, W): R, G, B planes row-major
    if layout == "NHWC":
        x = x.transpose(0, 2, 3, 1)  # (n, C, H, W) -> (n, H, W, C)
    out = np.ascontiguousarray(x, dtype=np.float32)
    out /= np.float32(255.0)
    return out


def _checked(name: str, obj: Any, source: str) -> Any:
    """One unpickled member, checked and reduced to arrays at once (so a hostile member's
    objects are dropped before the next member is read)."""
    return _meta(obj, source) if name == META_FILE else _batch_arrays(obj, source)


def read_archive_members(
    archive: str | os.PathLike[str], digests: dict[str, str] | None = None
) -> dict[str, Any]:
    """Read and check every member of a CIFAR-10 archive (bounded, safe); the checksum is not
    checked. Returns ``{member: (data, labels)}`` for batches and ``(label_names, info)`` for
    ``batches.meta``; ``digests``, if given, receives each member's MD5."""
    out: dict[str, Any] = {}
    with tarsafe.open_checked_tar(archive, ARCHIVE_LIMITS) as tf:
        for name in MEMBER_FILES:
            src = f"{archive}:{CIFAR10_FOLDER}/{name}"
            raw = tarsafe.read_member(tf, f"{CIFAR10_FOLDER}/{name}", archive)
            if digests is not None:
                digests[name] = bytes_digest(raw, "md5")
            out[name] = _checked(name, safe_load(raw, source=src, encoding="bytes"), src)
            del raw
    return out


def read_folder_members(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check every file of an extracted folder, as :func:`read_archive_members`."""
    out: dict[str, Any] = {}
    for name in MEMBER_FILES:
        path = Path(folder) / name
        if not path.is_file():
            raise DataError(f"{path}: file not found; {CIFAR10_ARCHIVE.hint(Path(folder).parent)}")
        if path.stat().st_size > _member_bound(name):
            raise DataError(
                f"{path}: {path.stat().st_size:,} bytes, more than the {_member_bound(name):,} "
                f"the format allows; {FIX_CORRUPT}"
            )
        with open(path, "rb") as fh:
            out[name] = _checked(name, safe_load(fh, source=path, encoding="bytes"), str(path))
    return out


def _read_members(data_dir: Path) -> tuple[dict[str, Any], Verification]:
    """Verify, then unpickle every member from the archive (preferred) or the extracted folder."""
    archive, folder = archive_path(data_dir), folder_path(data_dir)
    if archive.exists():
        ver = verify_file(archive, CIFAR10_ARCHIVE, fix=CIFAR10_ARCHIVE.fix_hint(data_dir))
        return read_archive_members(archive), ver
    if folder.is_dir():
        ver = verify_cifar10_folder(folder)
        return read_folder_members(folder), ver
    raise DataError(f"{archive}: CIFAR-10 not found; {CIFAR10_ARCHIVE.hint(data_dir)}")


@dataclass(frozen=True, eq=False)
class CifarArrays:
    """The raw contents of the format: uint8 ``(n, 3072)`` images and int32 labels per split."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    label_names: tuple[str, ...]
    synthetic_info: dict[str, Any]
    batch_sizes: dict[str, int]  # images per batch file


def arrays_from_members(members: dict[str, Any]) -> CifarArrays:
    """Gather the checked members of :func:`read_archive_members` into the two splits."""
    label_names, info = members[META_FILE]
    train = [members[n] for n in TRAIN_FILES]
    x_test, y_test = members[TEST_FILE]
    return CifarArrays(
        x_train=np.concatenate([d for d, _ in train]),
        y_train=np.concatenate([y for _, y in train]),
        x_test=x_test,
        y_test=y_test,
        label_names=label_names,
        synthetic_info=info,
        batch_sizes={
            **{n: d.shape[0] for n, (d, _) in zip(TRAIN_FILES, train, strict=True)},
            TEST_FILE: x_test.shape[0],
        },
    )


def load_cifar10(
    data_dir: str | os.PathLike[str] | None = None, *, layout: str = "NCHW"
) -> CifarData:
    """Load and verify CIFAR-10 from ``data_dir`` (see :func:`paths.resolve_data_dir`).

    Returns float32 images in [0, 1] in ``layout`` ("NCHW" default, or "NHWC") and int32
    labels. Raises :class:`DataError` (one line, naming the file and the fix) if files are
    missing, fail their checksum, are truncated, unsafe or have the wrong structure.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    data_dir = resolve_data_dir(data_dir)
    objs, ver = _read_members(data_dir)
    arrays = arrays_from_members(objs)
    del objs
    return CifarData(
        x_train=_to_float(arrays.x_train, layout),
        y_train=arrays.y_train,
        x_test=_to_float(arrays.x_test, layout),
        y_test=arrays.y_test,
        layout=layout,
        source=ver.source,
        checksum=ver,
        label_names=arrays.label_names,
        synthetic_info=arrays.synthetic_info,
    )


def extract_cifar10(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Verify the archive and safely extract it to ``<data_dir>/cifar-10-batches-py/``.

    For a synthetic archive the per-file MD5s are copied to the folder sidecar so the
    folder verifies on its own. Returns the folder path.
    """
    data_dir = resolve_data_dir(data_dir)
    archive = archive_path(data_dir)
    if not archive.exists():
        raise DataError(f"{archive}: CIFAR-10 archive not found; {CIFAR10_ARCHIVE.hint(data_dir)}")
    ver = verify_file(archive, CIFAR10_ARCHIVE, fix=CIFAR10_ARCHIVE.fix_hint(data_dir))
    tarsafe.safe_extract(archive, data_dir, ARCHIVE_LIMITS)
    side = folder_sidecar_path(data_dir)
    if ver.source != OFFICIAL:
        import json

        record = {k: v for k, v in ver.sidecar.items() if k not in ("md5", "sha256")}
        record["file"] = CIFAR10_FOLDER
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(side, text.encode("utf-8"))
    elif side.exists():
        side.unlink()
    folder = folder_path(data_dir)
    verify_cifar10_folder(folder)
    return folder
