"""Shared helpers for the data-layer tests (``tests/test_data_*.py``).

Small synthetic datasets are generated once per test session into a private temporary
directory (removed at exit); tests that modify files copy them to their own ``tmp_path``.
"""

from __future__ import annotations

import atexit
import io
import os
import pickle
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from rosetta.datasets import write_synthetic_cifar10, write_synthetic_imdb
from rosetta.datasets.checksums import sidecar_path, write_sidecar

_ROOT = Path(tempfile.mkdtemp(prefix="rosetta-data-tests-"))
atexit.register(shutil.rmtree, _ROOT, True)
_CACHE: dict[tuple, Path] = {}

SMALL_CIFAR = {"n_train": 2000, "n_test": 1000}
SMALL_IMDB = {"n_train": 1500, "n_test": 1000}


def synthetic_dir(dataset: str, seed: int = 0, **sizes: int) -> Path:
    """A directory holding a (cached) small synthetic ``dataset``; do not modify it."""
    defaults = SMALL_CIFAR if dataset == "cifar10" else SMALL_IMDB
    sizes = {**defaults, **sizes}
    key = (dataset, seed, tuple(sorted(sizes.items())))
    if key not in _CACHE:
        d = _ROOT / f"{dataset}-{seed}-{len(_CACHE)}"
        writer = write_synthetic_cifar10 if dataset == "cifar10" else write_synthetic_imdb
        writer(d, seed=seed, **sizes)
        _CACHE[key] = d
    return _CACHE[key]


def copy_dataset(dataset: str, dest: Path, **sizes: int) -> Path:
    """Copy a cached small synthetic dataset (file + sidecar) into ``dest``; returns the file."""
    src_dir = synthetic_dir(dataset, **sizes)
    name = "cifar-10-python.tar.gz" if dataset == "cifar10" else "imdb.npz"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(src_dir / name, dest / name)
    shutil.copy(sidecar_path(src_dir / name), sidecar_path(dest / name))
    return dest / name


def vouch(path: Path) -> None:
    """Write a synthetic sidecar for ``path`` so its checksum passes (attacker's view)."""
    write_sidecar(path, {"seed": 0, "sizes": {}})


class Evil:
    """Pickles to a call of ``os.system`` that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class EvilOpen:
    """Pickles to ``builtins.open(marker, 'w')`` (no shell needed)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A gzip'ed tar archive of the given (header, payload) members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for info, payload in members:
            if payload is not None:
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
            else:
                tf.addfile(info)
    return buf.getvalue()


def file_member(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    return info


def rewrite_cifar_member(archive: Path, member: str, payload: bytes) -> None:
    """Replace one member of a CIFAR tarball (keeping the others) and re-vouch for it."""
    with tarfile.open(archive) as tf:
        items = [(m, tf.extractfile(m).read() if m.isreg() else None) for m in tf.getmembers()]
    new = [(m, payload if m.name.endswith("/" + member) else data) for m, data in items]
    archive.write_bytes(tar_bytes(new))
    vouch(archive)


def write_npz(path: Path, arrays: dict[str, np.ndarray], raw: dict[str, bytes] | None = None):
    """An npz with the given arrays (pickled as NumPy would) and/or raw ``.npy`` members."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=True)
            zf.writestr(name + ".npy", buf.getvalue())
        for name, data in (raw or {}).items():
            zf.writestr(name + ".npy", data)


def object_npy_with_payload(payload: bytes, n: int = 3) -> bytes:
    """A ``.npy`` whose header declares an object array and whose body is ``payload``."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "|O", "fortran_order": False, "shape": (n,)}
    )
    return buf.getvalue() + payload


def evil_pickle(marker: Path, protocol: int = 2) -> bytes:
    return pickle.dumps(Evil(marker), protocol=protocol)


def run_cli(argv: list[str]) -> int:
    """Run the ``rosetta`` CLI in-process (the real ``rosetta.cli.main``); return its status."""
    from rosetta.cli import main

    return main(argv)


def softmax_regression_accuracy(
    x: np.ndarray,
    y: np.ndarray,
    xt: np.ndarray,
    yt: np.ndarray,
    *,
    classes: int,
    steps: int,
    lr: float,
    batch: int = 128,
    seed: int = 0,
) -> float:
    """Train multinomial logistic regression with minibatch SGD; held-out accuracy."""
    rng = np.random.default_rng(seed)
    w = np.zeros((x.shape[1], classes), np.float32)
    b = np.zeros(classes, np.float32)
    for _ in range(steps):
        idx = rng.integers(0, x.shape[0], batch)
        z = x[idx] @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(batch), y[idx]] -= 1.0  # d(loss)/dz
        w -= lr * (x[idx].T @ p) / batch
        b -= lr * p.mean(axis=0)
    return float(((xt @ w + b).argmax(axis=1) == yt).mean())
