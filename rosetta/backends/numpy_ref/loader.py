"""The reference's loader: NumPy fancy indexing per batch, in the runner's order."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def native_loader(
    x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int, dtype: str
) -> Iterator[tuple[np.ndarray, ...]]:
    """Complete batches of ``x[order]`` (token ids as int64, images in ``dtype``)."""
    for b in range(len(order) // batch_size):
        idx = order[b * batch_size : (b + 1) * batch_size]
        xb = as_input(np.take(x, idx, axis=0), dtype)
        yield (xb,) if y is None else (xb, np.take(y, idx, axis=0).astype(np.int64))


def as_input(x: np.ndarray, dtype: str) -> np.ndarray:
    """A canonical input batch as the reference computes on it."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return np.asarray(x, dtype=np.int64)  # token ids
    return np.asarray(x, dtype=dtype)
