"""The native loader: batches in the runner's order, moved to the device ahead of the step.

``jax.device_put`` is asynchronous: it returns at once and the copy proceeds while the caller
runs the current step. ``prefetch`` keeps ``depth`` batches in flight (the AlgoPerf/Flax
``prefetch_to_device`` idea), so a step never waits for its input's transfer. Only complete
batches are yielded; the batch is cut on the host (``np.take`` of ``order``'s slice), put in the
native layout (``weights.image_to_native``) and sent to the device in the model's dtype.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

import jax
import numpy as np

from rosetta.backends.jax.runtime import precision_scope
from rosetta.backends.jax.weights import image_to_native

PREFETCH_DEPTH = 2  # batches on their way to the device ahead of the one being consumed


def host_batches(
    x: np.ndarray,
    y: np.ndarray | None,
    order: np.ndarray,
    batch_size: int,
    *,
    dtype: str,
    layout: str,
) -> Iterator[tuple[np.ndarray, ...]]:
    """Complete host batches of ``x[order]`` (and ``y[order]``) in the native layout."""
    for b in range(len(order) // batch_size):
        idx = order[b * batch_size : (b + 1) * batch_size]
        xb = np.take(x, idx, axis=0)
        if xb.ndim == 4:
            xb = image_to_native(xb.astype(dtype, copy=False), layout)
        elif np.issubdtype(xb.dtype, np.integer):
            xb = xb.astype(np.int32, copy=False)  # token ids (N, T)
        elif xb.ndim == 3:  # a float sequence (the localiser's cut before the GRU): time-major
            xb = np.ascontiguousarray(xb.astype(dtype, copy=False).transpose(1, 0, 2))
        else:  # float features (N, F) (a cut before a dense layer)
            xb = xb.astype(dtype, copy=False)
        yield (xb,) if y is None else (xb, np.take(y, idx, axis=0).astype(np.int32))


def prefetch(
    batches: Iterator[tuple[np.ndarray, ...]],
    put: Callable[[tuple[np.ndarray, ...]], tuple],
    depth: int = PREFETCH_DEPTH,
) -> Iterator[tuple]:
    """Yield ``put(batch)`` for each batch, keeping ``depth`` batches already put ahead."""
    queue: collections.deque = collections.deque()
    for batch in batches:
        queue.append(put(batch))
        if len(queue) > depth:
            yield queue.popleft()
    while queue:
        yield queue.popleft()


def device_loader(
    x: np.ndarray,
    y: np.ndarray | None,
    order: np.ndarray,
    batch_size: int,
    *,
    device: jax.Device,
    dtype: str,
    layout: str,
) -> Iterator[tuple]:
    """Native batches on ``device``: ``host_batches`` through ``prefetch`` with ``device_put``."""

    def put(batch: tuple[np.ndarray, ...]) -> tuple:
        with precision_scope(dtype):  # float64 arrays stay float64 (entered per batch, not held)
            return tuple(jax.device_put(a, device) for a in batch)

    hosts = host_batches(x, y, order, batch_size, dtype=dtype, layout=layout)
    return prefetch(hosts, put)
