"""What is in a data directory: which datasets, real or synthetic, sizes, checksum status."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rosetta.datasets import cifar10, imdb
from rosetta.datasets.checksums import Verification
from rosetta.datasets.paths import leftover_temp_files, resolve_data_dir
from rosetta.errors import DataError

OFFICIAL_SIZES = {
    "cifar10": {"train": 50000, "test": 10000},
    "imdb": {"train": 25000, "test": 25000},
}


@dataclass(frozen=True)
class DatasetStatus:
    """One dataset in the data directory."""

    name: str
    path: str
    state: str  # "missing" | "real" | "synthetic" | "invalid"
    detail: str
    size_bytes: int = 0
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """True if the loader will accept the files."""
        return self.state in ("real", "synthetic")


def _status(name: str, path: Path, check) -> DatasetStatus:
    try:
        ver: Verification = check(path)
    except DataError as exc:
        return DatasetStatus(name, str(path), "invalid", str(exc), _size(path))
    if ver.synthetic:
        side = ver.sidecar
        raw = side.get("sizes", {})
        sizes = {k: int(raw[k]) for k in ("train", "test") if k in raw}
        detail = f"{ver.algorithm} ok (synthetic sidecar; seed {side.get('seed')})"
    else:
        sizes = OFFICIAL_SIZES[name]
        detail = f"{ver.algorithm} ok (official checksum)"
    return DatasetStatus(name, str(path), ver.source, detail, _size(path), sizes)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    return 0


def describe(data_dir: str | os.PathLike[str] | None = None) -> list[DatasetStatus]:
    """Status of CIFAR-10 and IMDB in ``data_dir`` (checksums are computed, not assumed)."""
    data_dir = resolve_data_dir(data_dir)
    out = []
    archive, folder = cifar10.archive_path(data_dir), cifar10.folder_path(data_dir)
    if archive.exists():
        out.append(_status("cifar10", archive, cifar10.verify_cifar10_archive))
    elif folder.is_dir():
        out.append(_status("cifar10", folder, cifar10.verify_cifar10_folder))
    else:
        out.append(DatasetStatus("cifar10", str(archive), "missing", cifar10.HOW_TO_GET))
    path = imdb.archive_path(data_dir)
    if path.exists():
        out.append(_status("imdb", path, imdb.verify_imdb))
    else:
        out.append(DatasetStatus("imdb", str(path), "missing", imdb.HOW_TO_GET))
    return out


def format_report(data_dir: str | os.PathLike[str] | None = None) -> tuple[str, bool]:
    """Human-readable report for ``rosetta data info``; second value: no invalid files."""
    data_dir = resolve_data_dir(data_dir)
    lines = [f"data directory: {data_dir}" + ("" if data_dir.is_dir() else " (does not exist)")]
    ok = True
    for st in describe(data_dir):
        sizes = ", ".join(f"{k} {v}" for k, v in st.sizes.items()) or "-"
        mb = f"{st.size_bytes / 1e6:.1f} MB" if st.size_bytes else "-"
        lines.append(f"  {st.name:<8} {st.state:<9} {Path(st.path).name}  {mb}  [{sizes}]")
        lines.append(f"           {st.detail}")
        ok &= st.state != "invalid"
    lines.append(
        "  resnet50 random    generated on the fly (1280 images 224x224x3, seed 0; no files)"
    )
    for tmp in leftover_temp_files(data_dir):
        lines.append(
            f"  note: leftover temporary file from an interrupted write: {tmp} (safe to delete)"
        )
    return "\n".join(lines), ok
