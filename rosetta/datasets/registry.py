"""Registry of data sets: one entry per data set, like the backends' registry.

Every command that touches data (``rosetta data synth | fetch | info | accept``, ``rosetta
bench`` and the runner's ``load_cell_data``) looks a data set up here instead of branching on
its name. Adding a data set is one loader module plus one :func:`register` call below.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosetta.datasets import cifar10, copycheck, imdb
from rosetta.datasets.checksums import CIFAR10_ARCHIVE, IMDB_ARCHIVE, RemoteFile, Verification
from rosetta.datasets.paths import resolve_data_dir
from rosetta.datasets.synth_cifar10 import write_synthetic_cifar10
from rosetta.datasets.synth_imdb import write_synthetic_imdb
from rosetta.errors import DataError


@dataclass(frozen=True)
class DatasetEntry:
    """What Rosetta knows of one data set: where it lives, how to check, load and make it.

    ``remote`` is None for a data set generated on the fly (no file: ``random_images``).
    ``load(data_dir, options)`` returns an object with ``x_train, y_train, x_test, y_test,
    source, checksum`` (options: the spec's ``dataset`` fields). ``synthesize(data_dir, seed,
    n_train, n_test)`` writes a synthetic file in the official format.
    """

    name: str
    title: str
    remote: RemoteFile | None
    official_sizes: dict[str, int] = field(default_factory=dict)
    cli_prefix: str = ""  # the `rosetta data synth --<prefix>-train N` option names
    locate: Callable[[Path], Path | None] = lambda data_dir: None
    verify: Callable[[Path], Verification] | None = None
    load: Callable[[Path, dict[str, Any]], Any] | None = None
    synthesize: Callable[..., Path] | None = None
    extract: Callable[[Path], Path] | None = None
    check_copy: Callable[[Path], copycheck.CopyReport] | None = None  # `rosetta data accept`
    description: str = ""  # for a generated data set: what is generated

    @property
    def generated(self) -> bool:
        """True for a data set made on the fly, with no file in the data directory."""
        return self.remote is None

    def present(self, data_dir: str | os.PathLike[str] | None) -> Path | None:
        """The data set's file (or folder) in ``data_dir``, or None if absent."""
        return None if self.generated else self.locate(resolve_data_dir(data_dir))

    def default_path(self, data_dir: str | os.PathLike[str] | None) -> Path:
        """Where the data set's file belongs in ``data_dir``."""
        if self.remote is None:
            raise DataError(f"{self.name} is generated on the fly and has no file")
        return resolve_data_dir(data_dir) / self.remote.filename


REGISTRY: dict[str, DatasetEntry] = {}


def register(entry: DatasetEntry) -> DatasetEntry:
    """Enter ``entry`` in :data:`REGISTRY` under its name."""
    if entry.name in REGISTRY:
        raise ValueError(f"dataset {entry.name!r} registered twice")
    REGISTRY[entry.name] = entry
    return entry


def get(name: str) -> DatasetEntry:
    """The entry of data set ``name``; an unknown name raises ``DataError`` listing the valid."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; valid: {', '.join(REGISTRY)}") from None


def file_datasets() -> list[str]:
    """Names of the data sets that live in files (those `rosetta data` commands handle)."""
    return [n for n, e in REGISTRY.items() if not e.generated]


# -- the data sets ------------------------------------------------------------------------------


def _locate_cifar10(data_dir: Path) -> Path | None:
    archive, folder = cifar10.archive_path(data_dir), cifar10.folder_path(data_dir)
    return archive if archive.exists() else folder if folder.is_dir() else None


def _verify_cifar10(path: Path) -> Verification:
    if path.is_dir():
        return cifar10.verify_cifar10_folder(path)
    return cifar10.verify_cifar10_archive(path)


def _locate_imdb(data_dir: Path) -> Path | None:
    path = imdb.archive_path(data_dir)
    return path if path.exists() else None


def _load_imdb(data_dir: Path, options: dict[str, Any]) -> imdb.ImdbData:
    keys = ("num_words", "maxlen", "start_id", "oov_id", "index_from")
    return imdb.load_imdb(
        data_dir,
        padding=str(options["padding"]),
        windows=int(options.get("windows", 0)),  # > 0: read as text (a language model's)
        **{k: int(options[k]) for k in keys},
    )


register(
    DatasetEntry(
        name="cifar10",
        title="CIFAR-10",
        remote=CIFAR10_ARCHIVE,
        official_sizes=cifar10.OFFICIAL_SIZES,
        cli_prefix="cifar",
        locate=_locate_cifar10,
        verify=_verify_cifar10,
        load=lambda data_dir, options: cifar10.load_cifar10(data_dir, layout="NCHW"),
        synthesize=write_synthetic_cifar10,
        extract=cifar10.extract_cifar10,
        check_copy=copycheck.check_cifar10_copy,
    )
)
register(
    DatasetEntry(
        name="imdb",
        title="IMDB",
        remote=IMDB_ARCHIVE,
        official_sizes=imdb.OFFICIAL_SIZES,
        cli_prefix="imdb",
        locate=_locate_imdb,
        verify=imdb.verify_imdb,
        load=_load_imdb,
        synthesize=write_synthetic_imdb,
        check_copy=copycheck.check_imdb_copy,
    )
)
register(
    DatasetEntry(
        name="random_images",
        title="ResNet-50 input",
        remote=None,
        description="generated on the fly (1280 images 224x224x3, seed 0; no files)",
    )
)
