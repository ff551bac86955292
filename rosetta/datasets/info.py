"""What is in a data directory: which datasets, from which source, sizes, checksum status."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rosetta.datasets import registry
from rosetta.datasets.checksums import OFFICIAL, SYNTHETIC, USER_PROVIDED, Verification
from rosetta.datasets.paths import is_stale, leftover_temp_files, resolve_data_dir
from rosetta.errors import DataError

USABLE = (OFFICIAL, USER_PROVIDED, SYNTHETIC)


@dataclass(frozen=True)
class DatasetStatus:
    """One dataset in the data directory."""

    name: str
    path: str
    state: str  # "missing" | "official" | "user-provided" | "synthetic" | "invalid"
    detail: str
    size_bytes: int = 0
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """True if the loader will accept the files."""
        return self.state in USABLE


def _status(entry: registry.DatasetEntry, path: Path) -> DatasetStatus:
    assert entry.verify is not None and entry.remote is not None
    try:
        ver: Verification = entry.verify(path)
    except DataError as exc:
        return DatasetStatus(entry.name, str(path), "invalid", str(exc), _size(path))
    side = ver.sidecar
    if ver.source == OFFICIAL:
        sizes = dict(entry.official_sizes)
        detail = f"{ver.algorithm} ok (official checksum)"
    else:
        raw = side.get("sizes", {})
        sizes = {k: int(raw[k]) for k in ("train", "test") if k in raw}
        if ver.source == SYNTHETIC:
            detail = f"{ver.algorithm} ok (synthetic sidecar; seed {side.get('seed')})"
        else:
            detail = (
                f"{ver.algorithm} ok (your own copy, checked by contents and accepted "
                f"{side.get('accepted_at', '?')} from {side.get('accepted_from', '?')})"
            )
    return DatasetStatus(entry.name, str(path), ver.source, detail, _size(path), sizes)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    return 0


def describe(data_dir: str | os.PathLike[str] | None = None) -> list[DatasetStatus]:
    """Status of every file-backed data set in ``data_dir`` (checksums computed, not assumed)."""
    data_dir = resolve_data_dir(data_dir)
    out = []
    for name in registry.file_datasets():
        entry = registry.get(name)
        path = entry.present(data_dir)
        if path is None:
            missing = entry.default_path(data_dir)
            hint = entry.remote.hint(data_dir) if entry.remote else ""
            out.append(DatasetStatus(name, str(missing), "missing", hint))
        else:
            out.append(_status(entry, path))
    return out


def format_report(data_dir: str | os.PathLike[str] | None = None) -> tuple[str, bool]:
    """Human-readable report for ``rosetta data info``; second value: no invalid files."""
    data_dir = resolve_data_dir(data_dir)
    lines = [f"data directory: {data_dir}" + ("" if data_dir.is_dir() else " (does not exist)")]
    ok = True
    for st in describe(data_dir):
        sizes = ", ".join(f"{k} {v}" for k, v in st.sizes.items()) or "-"
        mb = f"{st.size_bytes / 1e6:.1f} MB" if st.size_bytes else "-"
        lines.append(f"  {st.name:<8} {st.state:<13} {Path(st.path).name}  {mb}  [{sizes}]")
        lines.append(f"           {st.detail}")
        ok &= st.state != "invalid"
    for name, entry in registry.REGISTRY.items():
        if entry.generated:
            lines.append(f"  {name:<8} generated     {entry.description}")
    for tmp in leftover_temp_files(data_dir):
        state = "stale, removed by the next write here" if is_stale(tmp) else "being written"
        lines.append(f"  note: temporary file {tmp} ({state}; safe to delete when stale)")
    return "\n".join(lines), ok
