"""Mini-batches: complete batches only, shuffled per epoch from ``(seed, epoch)``."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def num_batches(n: int, batch_size: int) -> int:
    """Number of complete batches of ``batch_size`` in ``n`` samples (the remainder is dropped)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    return n // batch_size


def epoch_order(n: int, *, shuffle: bool, seed: int = 0, epoch: int = 0) -> np.ndarray:
    """Sample order of one epoch: ``arange(n)``, or ``default_rng([seed, epoch]).permutation(n)``.

    The permutation depends only on ``(seed, epoch)``, so epoch 3 can be reproduced without
    replaying epochs 0-2, and every backend sees the same batches.
    """
    if not shuffle:
        return np.arange(n)
    return np.random.default_rng([seed, epoch]).permutation(n)


def iterate_batches(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    *,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    batch_axis: int = 0,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(x_batch, y_batch)`` for the complete batches of one epoch.

    ``x`` is split along ``batch_axis`` (0 for batch-major data, 1 for a time-major
    ``(T, N)`` IMDB array, giving ``(T, batch_size)`` batches); ``y`` along axis 0.
    Batches are fresh C-contiguous arrays (``np.take``), never views of ``x``.
    """
    n = x.shape[batch_axis]
    if y.shape[0] != n:
        raise ValueError(f"x has {n} samples along axis {batch_axis} but y has {y.shape[0]}")
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    for b in range(num_batches(n, batch_size)):
        idx = order[b * batch_size : (b + 1) * batch_size]
        yield np.take(x, idx, axis=batch_axis), np.take(y, idx, axis=0)
