"""The data of one cell: the workload's data set cut to the profile, from the data directory."""

from __future__ import annotations

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


def load_cell_data(workload: Workload, profile: Profile, data_dir: str | Path | None) -> CellData:
    """Load the workload's data set (found in the dataset registry) and keep the profile's
    first train/test samples."""
    ds = workload.dataset
    entry = registry.get(ds.name)
    if entry.generated or entry.load is None:
        return CellData(None, None, None, None, GENERATED, "")
    d = entry.load(datasets.resolve_data_dir(data_dir), dict(ds.options))
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
