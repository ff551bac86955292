"""Checking a user's own copy of a data set by its contents, for ``rosetta data accept``.

A copy whose bytes differ from the official file (re-packed, from a mirror) cannot be checked
by its checksum, so it is checked by what it holds: the official format read with the same
bounded, safe readers as the loaders, the official counts, label ranges and class balance.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rosetta.datasets import cifar10, imdb
from rosetta.datasets.checksums import bytes_digest
from rosetta.errors import DataError


@dataclass(frozen=True)
class CopyReport:
    """What the checks of a copy found (written into its ``user-provided`` sidecar)."""

    dataset: str
    sizes: dict[str, int]
    facts: tuple[str, ...]
    members: dict[str, str] = field(default_factory=dict)  # CIFAR-10: per-file MD5


def _refuse(path: Path, what: str) -> DataError:
    return DataError(f"{path}: not a complete copy of the data set ({what}); nothing was accepted")


def _refuse_synthetic(path: Path, info: dict, title: str, synth: str) -> None:
    """A file that carries Rosetta's own synthetic marker is not a copy of the real data set,
    whatever its sidecar says (or whether it has one): accepting it would relabel it."""
    if info:
        raise DataError(
            f"{path}: carries Rosetta's synthetic-data marker; it is not a copy of {title} and "
            f"cannot be accepted as user-provided (synthetic data is made by `{synth}`)"
        )


def _check_counts(path: Path, y: np.ndarray, split: str, n: int, classes: int) -> str:
    if y.shape[0] != n:
        raise _refuse(path, f"{y.shape[0]} {split} samples, the official data set has {n}")
    counts = np.bincount(y, minlength=classes)
    if counts.shape[0] != classes or (counts != n // classes).any():
        raise _refuse(
            path, f"{split} labels per class {counts.tolist()}, expected {n // classes} each"
        )
    return f"{split}: {n} samples, {classes} classes of {n // classes}"


def check_cifar10_copy(path: str | os.PathLike[str]) -> CopyReport:
    """Check a CIFAR-10 archive or extracted folder: format, 5 x 10000 + 10000 images, labels
    in 0..9 with 5000 / 1000 per class, 10 label names."""
    path = Path(path)
    if path.is_dir():
        objs = cifar10.read_folder_members(path)
        members = {n: bytes_digest((path / n).read_bytes(), "md5") for n in cifar10.MEMBER_FILES}
    else:
        members = {}
        objs = cifar10.read_archive_members(path, digests=members)
    arrays = cifar10.arrays_from_members(objs)
    _refuse_synthetic(path, arrays.synthetic_info, "CIFAR-10", "rosetta data synth")
    for name, n in arrays.batch_sizes.items():
        if n != cifar10.BATCH_IMAGES:
            raise _refuse(
                path, f"{name} holds {n} images, the official batches hold {cifar10.BATCH_IMAGES}"
            )
    sizes = cifar10.OFFICIAL_SIZES
    facts = (
        _check_counts(path, arrays.y_train, "train", sizes["train"], 10),
        _check_counts(path, arrays.y_test, "test", sizes["test"], 10),
        f"images uint8 (n, 3072); label names {', '.join(arrays.label_names)}",
    )
    return CopyReport("cifar10", dict(sizes), facts, members)


def check_imdb_copy(path: str | os.PathLike[str]) -> CopyReport:
    """Check an ``imdb.npz``: format, 25000 + 25000 non-empty reviews of integer word ranks,
    labels 0/1 with 12500 of each per split."""
    path = Path(path)
    if path.is_dir():
        raise _refuse(path, "a folder; IMDB is one file, imdb.npz")
    arrays = imdb.read_imdb_arrays(path)
    _refuse_synthetic(path, arrays.synthetic_info, "IMDB", "rosetta data synth")
    sizes = imdb.OFFICIAL_SIZES
    facts = []
    for split in ("train", "test"):
        flat, lengths = arrays.reviews[split]
        facts.append(_check_counts(path, arrays.labels[split], split, sizes[split], 2))
        if lengths.size and lengths.min() < 1:
            raise _refuse(path, f"an empty review in x_{split}")
        ranks = f"{int(flat.min())}..{int(flat.max())}" if flat.size else "-"
        facts.append(f"x_{split}: {int(lengths.sum())} tokens, word ranks {ranks}")
    return CopyReport("imdb", dict(sizes), tuple(facts))
