"""The data of one cell: the workload's data set cut to the profile, from the data directory.

Decoding a data set costs more than a small cell's timed work (CIFAR-10's archive: ~5.5 s,
IMDB's: ~2.2 s on the 2-core machine), and a sweep loads the same cut in dozens of processes.
So a cell that is given a ``cache_dir`` (``rosetta bench`` gives each run its own) keeps its
verified cut there as a plain ``.npz`` (no pickles), and the next cell of the run with the same
data set, options and cut reads that instead. The cache key includes the data file's path,
size, modification time and inode and its sidecar's, so a file changed or replaced during the
run is read, verified and decoded again. Cuts over ``CACHE_MAX_BYTES`` are not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rosetta import datasets
from rosetta.datasets import registry
from rosetta.datasets.checksums import GENERATED
from rosetta.spec.workload import Profile, Workload


@dataclass(frozen=True)
class CellData:
    """Training and test arrays (training workloads) or the random-image seed (features)."""

    x_train: np.ndarray | None
    y_train: np.ndarray | None
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    source: str  # "official" | "user-provided" | "synthetic" | "generated"
    checksum: str  # digest of the file the arrays came from ("" for generated images)


DATA_CACHE = ".data-cache"  # the cache's folder in a run's folder (rosetta bench removes it)
CACHE_MAX_BYTES = 64 * 2**20  # a cut larger than this is decoded by every cell (full profile)
_ARRAYS = ("x_train", "y_train", "x_test", "y_test")


def load_cell_data(
    workload: Workload,
    profile: Profile,
    data_dir: str | Path | None,
    cache_dir: str | Path | None = None,
) -> CellData:
    """Load the workload's data set (found in the dataset registry) and keep the profile's
    first train/test samples; with ``cache_dir``, through the run's cache (module docstring)."""
    ds = workload.dataset
    entry = registry.get(ds.name)
    if entry.generated or entry.load is None:
        return CellData(None, None, None, None, GENERATED, "")
    root = datasets.resolve_data_dir(data_dir)
    n_train, n_test = profile.train_samples, profile.test_samples
    cached = _cache_path(cache_dir, entry, root, dict(ds.options), n_train, n_test)
    if cached is not None and cached.is_file():
        hit = _read_cache(cached)
        if hit is not None:
            return hit
    d = entry.load(root, dict(ds.options))
    data = CellData(
        d.x_train[:n_train],
        d.y_train[:n_train],
        d.x_test[:n_test],
        d.y_test[:n_test],
        d.source,
        f"{d.checksum.algorithm}:{d.checksum.digest}",
    )
    if cached is not None:
        _write_cache(cached, data)
    return data


def _cache_path(cache_dir, entry, root: Path, options: dict, n_train: int, n_test: int):
    """Where this cut is cached, or None (no cache asked, or no single file to key it on)."""
    if not cache_dir:
        return None
    path = entry.locate(root)
    if path is None or not path.is_file():  # an extracted folder: its members are not keyed
        return None
    sidecar = path.with_name(path.name + ".rosetta.json")
    facts = [entry.name, sorted(options.items()), n_train, n_test, str(path.resolve())]
    for f in (path, sidecar):
        st = f.stat() if f.exists() else None
        facts.append(None if st is None else [st.st_size, st.st_mtime_ns, st.st_ino])
    key = hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()[:24]
    return Path(cache_dir) / f"{entry.name}-{key}.npz"


def _read_cache(path: Path) -> CellData | None:
    """The cached cut, or None when the file is unreadable (then the cell decodes again)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            return CellData(*(z[k] for k in _ARRAYS), meta["source"], meta["checksum"])
    except (OSError, ValueError, KeyError):
        return None


def _write_cache(path: Path, data: CellData) -> None:
    """Keep ``data`` at ``path`` (written aside, then renamed: cells running at once never read
    half a file); a cache that cannot be written is no error, the next cell decodes again."""
    arrays = {k: getattr(data, k) for k in _ARRAYS}
    if sum(a.nbytes for a in arrays.values()) > CACHE_MAX_BYTES:
        return
    meta = json.dumps({"source": data.source, "checksum": data.checksum})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            np.savez(f, meta=np.array(meta), **arrays)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def feature_images(workload: Workload, start: int, count: int) -> np.ndarray:
    """``count`` random images from image ``start`` on (spec seed, input size), NCHW float32.

    Image ``i`` is image ``i % 32`` of random batch ``i // 32`` (``datasets.random_image_batch``),
    so the set is the same whatever batch size reads it."""
    seed = int(workload.dataset.get("seed", 0))
    size = workload.input.shape[1]
    per = 32
    first, last = start // per, (start + count - 1) // per
    blocks = [
        datasets.random_image_batch(i, batch_size=per, seed=seed, size=size)
        for i in range(first, last + 1)
    ]
    x = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    return x[start - first * per : start - first * per + count]
