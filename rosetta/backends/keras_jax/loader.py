"""The native loader of Keras on JAX: host batches in the runner's order, put on the device ahead
of the step with the ``jax`` backend's prefetching (``rosetta/backends/jax/loader.py``).

Keras' own JAX data path (``ArrayDataAdapter.get_jax_iterator``) yields NumPy batches that the
trainer puts on the device inside the step; here the batch is cut on the host (``np.take`` of
``order``'s slice, complete batches only), put in the Keras layout (NHWC images; token ids and
sequences batch-major, as Keras' GRU reads them) and sent to the device ``PREFETCH_DEPTH``
batches ahead, so a step never waits for its input's transfer.
"""

from __future__ import annotations

from collections.abc import Iterator

import jax
import numpy as np

from rosetta.backends.jax.loader import PREFETCH_DEPTH, prefetch
from rosetta.backends.jax.runtime import precision_scope
from rosetta.backends.keras_common.weights import images_to_canonical, images_to_layout

__all__ = ["PREFETCH_DEPTH", "device_loader", "to_canonical"]


def host_batches(
    x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int, *, dtype: str,
    data_format: str,
) -> Iterator[tuple[np.ndarray, ...]]:  # fmt: skip
    """Complete host batches of ``x[order]`` (and ``y[order]``) in the Keras layout."""
    for b in range(len(order) // batch_size):
        idx = order[b * batch_size : (b + 1) * batch_size]
        xb = np.take(x, idx, axis=0)
        if np.issubdtype(xb.dtype, np.integer):
            xb = xb.astype(np.int32, copy=False)  # token ids (N, T)
        else:  # images (N, C, H, W) -> the data format; a cut's (N, F) or (N, T, E) as they are
            xb = images_to_layout(xb.astype(dtype, copy=False), data_format)
        yield (xb,) if y is None else (xb, np.take(y, idx, axis=0).astype(np.int32))


def device_loader(
    x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int, *,
    device: jax.Device, dtype: str, data_format: str,
) -> Iterator[tuple]:  # fmt: skip
    """Native batches on ``device``: ``host_batches`` through ``prefetch`` with ``device_put``."""

    def put(batch: tuple[np.ndarray, ...]) -> tuple:
        with precision_scope(dtype):  # float64 arrays stay float64
            return tuple(jax.device_put(a, device) for a in batch)

    hosts = host_batches(x, y, order, batch_size, dtype=dtype, data_format=data_format)
    return prefetch(hosts, put)


def to_canonical(batch: tuple, data_format: str) -> tuple[np.ndarray, ...]:
    """A native batch back in canonical layout."""
    x, *rest = (np.asarray(a) for a in batch)
    return (images_to_canonical(x, data_format), *rest)
