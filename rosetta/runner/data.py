"""The data of one cell: the workload's data set cut to the profile, from the data directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rosetta import datasets
from rosetta.spec.workload import Profile, Workload


@dataclass(frozen=True)
class CellData:
    """Training and test arrays (training workloads) or the random-image seed (features)."""

    x_train: np.ndarray | None
    y_train: np.ndarray | None
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    source: str  # "real" | "synthetic" | "generated"
    checksum: str  # digest of the file the arrays came from ("" for generated images)


def load_cell_data(workload: Workload, profile: Profile, data_dir: str | Path | None) -> CellData:
    """Load the workload's data set and keep the profile's first train/test samples."""
    ds = workload.dataset
    if ds.name == "random_images":
        return CellData(None, None, None, None, "generated", "")
    if ds.name == "cifar10":
        d = datasets.load_cifar10(data_dir, layout="NCHW")
    elif ds.name == "imdb":
        d = datasets.load_imdb(
            data_dir,
            num_words=int(ds.get("num_words")),
            maxlen=int(ds.get("maxlen")),
            padding=str(ds.get("padding")),
            start_id=int(ds.get("start_id")),
            oov_id=int(ds.get("oov_id")),
            index_from=int(ds.get("index_from")),
        )
    else:  # the spec loader admits no other name
        raise AssertionError(ds.name)
    n_train, n_test = profile.train_samples, profile.test_samples
    return CellData(
        d.x_train[:n_train],
        d.y_train[:n_train],
        d.x_test[:n_test],
        d.y_test[:n_test],
        d.source,
        f"{d.checksum.algorithm}:{d.checksum.digest}",
    )


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
