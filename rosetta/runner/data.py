"""The data of one cell: the workload's data set cut to the profile, from the data directory.

Decoding a data set costs more than a small cell's timed work (CIFAR-10's archive: ~5.5 s,
IMDB's: ~2.2 s on the 2-core machine), and a sweep loads the same cut in dozens of processes.
So a cell that is given a ``cache_dir`` (``rosetta bench`` gives each run its own) keeps its
verified cut there as a plain ``.npz`` (no pickles), and the next cell of the run with the same
data set, options and cut reads that instead. The cache key includes the data file's path,
size, modification time and inode and its sidecar's, so a file changed or replaced during the
run is read, verified and decoded again. Cuts over ``CACHE_MAX_BYTES`` are not cached.

The cache is verified, never trusted: the cell that writes a cut records the sha256 of the
file's bytes (and the cut's own digest, :func:`cut_digest`) in a digest file beside it, and
both files are written once (hard links: a later cell never replaces either). A cell that
reads the cut hashes the bytes it read and compares; a cut that does not match (replaced,
edited, truncated) or has no digest is not used: the cell names the cache file in a flag of its
record and decodes the cut again from the verified data file. The cut digest a record names is
computed from the arrays read, never copied: arrays that differ from the digest recorded beside
them (a poisoned cut whose file digest was rewritten to match) fail the cell, naming the file.
Every record names the data it used: the data file's checksum and the cut's digest (the same
whether decoded or read from the cache, so cells of one run can be compared).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rosetta import datasets
from rosetta.datasets import registry
from rosetta.datasets.checksums import GENERATED
from rosetta.errors import DataError
from rosetta.runner import safefile
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
    cut_digest: str = ""  # sha256 of the four arrays (cut_digest()); "" for generated images
    notes: tuple[str, ...] = ()  # one line each for the cell's flags (a cache file refused)


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
    notes: tuple[str, ...] = ()
    if cached is not None and os.path.lexists(cached):
        hit, problem = _read_cache(cached)
        if hit is not None:
            return hit
        notes = (
            f"data cache {cached} {problem}: not used, the cut was decoded again from the "
            f"verified data file",
        )
    d = entry.load(root, dict(ds.options))
    arrays = (d.x_train[:n_train], d.y_train[:n_train], d.x_test[:n_test], d.y_test[:n_test])
    checksum = f"{d.checksum.algorithm}:{d.checksum.digest}"
    data = CellData(*arrays, d.source, checksum, cut_digest(*arrays), notes)
    if cached is not None and not notes:  # a refused cache file stays as found (evidence)
        _write_cache(cached, data)
    return data


def cut_digest(*arrays: np.ndarray) -> str:
    """``sha256:<hex>`` of the arrays' dtypes, shapes and bytes, in order: the data a cell
    trained and tested on, whatever the file or cache it came from."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(json.dumps([a.dtype.str, list(a.shape)]).encode())
        h.update(a.reshape(-1).view(np.uint8))
    return f"sha256:{h.hexdigest()}"


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


_NPZ_SLACK = 2**20  # an .npz of a cut: its arrays plus headers, far under this much more
_DIGEST_MAX = 4096  # a digest file: two digests in JSON


def digest_path(path: Path) -> Path:
    """The digest file of the cache file ``path`` (``<name>.npz.sha256.json``)."""
    return path.with_name(path.name + ".sha256.json")


def _read_cache(path: Path) -> tuple[CellData | None, str]:
    """(the cached cut, '') when its bytes match the recorded digest, else (None, what is wrong:
    a phrase completing "data cache <path> ...")."""
    try:
        recorded = json.loads(safefile.read_text(digest_path(path), _DIGEST_MAX))
        want, cut = recorded["file_sha256"], recorded["cut_digest"]
    except FileNotFoundError:
        return None, "has no recorded digest"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"has an unreadable digest file ({type(exc).__name__})"
    try:
        raw = safefile.read_bytes(path, CACHE_MAX_BYTES + _NPZ_SLACK)
    except (OSError, ValueError) as exc:
        return None, f"is unreadable ({exc})"
    got = hashlib.sha256(raw).hexdigest()
    if got != want:
        return None, f"does not match its recorded digest (sha256 {got[:16]}, recorded {want[:16]})"
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = [z[k] for k in _ARRAYS]
    except (OSError, ValueError, KeyError) as exc:
        return None, f"is unreadable ({type(exc).__name__})"
    # what the record claims is computed from the arrays that will run, never copied from the
    # digest file: a cut whose file digest was rewritten to match poisoned arrays is caught here
    # (and one whose digest file was rewritten whole claims its own digest, which the run's other
    # cells then disagree with: ``records.data_changes``)
    ran = cut_digest(*arrays)
    if ran != cut:
        raise DataError(
            f"data cache {path}: its arrays' digest {ran[:23]} is not the cut digest recorded "
            f"beside it ({str(cut)[:23]}): the cache was altered; remove it (rosetta bench "
            "decodes the cut again) and check who writes the run folder"
        )
    return CellData(*arrays, meta["source"], meta["checksum"], ran), ""


def _write_cache(path: Path, data: CellData) -> None:
    """Keep ``data`` at ``path`` with its digest file, each written aside and then linked into
    place once (cells running at once never read half a file, and none replaces a cut another
    wrote); a cache that cannot be written is no error, the next cell decodes again."""
    arrays = {k: getattr(data, k) for k in _ARRAYS}
    if sum(a.nbytes for a in arrays.values()) > CACHE_MAX_BYTES:
        return
    meta = json.dumps({"source": data.source, "checksum": data.checksum})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    dtmp = path.with_name(f".{path.name}.{os.getpid()}.sha256.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        np.savez(buf, meta=np.array(meta), **arrays)
        raw = buf.getvalue()
        tmp.write_bytes(raw)
        digest = {"file_sha256": hashlib.sha256(raw).hexdigest(), "cut_digest": data.cut_digest}
        dtmp.write_text(json.dumps(digest))
        os.link(dtmp, digest_path(path))  # the digest first: a cut is never there without it
        os.link(tmp, path)
    except OSError:
        pass  # FileExistsError included: another cell cached this cut first, its files stay
    finally:
        tmp.unlink(missing_ok=True)
        dtmp.unlink(missing_ok=True)


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
