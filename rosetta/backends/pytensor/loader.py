"""The native loader: the host batches a compiled PyTensor function takes, in the runner's order.

On the CPU a PyTensor function's inputs *are* NumPy arrays (``TensorType`` values), so a native
batch is a C-contiguous ``ndarray`` already in the function's input dtype and layout: images
channels-last in the model's dtype, token ids ``int32``, labels ``int64``. Cutting and converting
happens here, once per batch, so the function's own input check finds the exact type and copies
nothing. (Theano's own idiom, the whole data set in a ``shared`` variable indexed by
a batch number through ``givens``, would tie one compiled step to one data set and one order;
the runner gives each epoch its own order.) Only complete batches are yielded.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from rosetta.backends.pytensor.weights import image_to_canonical, image_to_native


def host_batches(
    x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int, *, dtype: str
) -> Iterator[tuple[np.ndarray, ...]]:
    """Complete batches of ``x[order]`` (and ``y[order]``) in the native layout and dtypes."""
    for b in range(len(order) // batch_size):
        idx = order[b * batch_size : (b + 1) * batch_size]
        yield native_batch(np.take(x, idx, axis=0), None if y is None else np.take(y, idx, axis=0),
                           dtype)  # fmt: skip


def native_batch(x: np.ndarray, y: np.ndarray | None, dtype: str) -> tuple[np.ndarray, ...]:
    """One canonical batch as the compiled functions take it."""
    if x.ndim == 4:  # images (N, C, H, W) -> (N, H, W, C)
        xb = image_to_native(x.astype(dtype, copy=False))
    elif np.issubdtype(x.dtype, np.integer):  # token ids (N, T)
        xb = np.ascontiguousarray(x, dtype=np.int32)
    elif x.ndim == 3:  # a float sequence (the localiser's cut before the GRU): time-major
        xb = np.ascontiguousarray(x.astype(dtype, copy=False).transpose(1, 0, 2))  # (T, N, E)
    else:  # float features (N, F) (a cut before a dense layer)
        xb = np.ascontiguousarray(x, dtype=dtype)
    return (xb,) if y is None else (xb, np.ascontiguousarray(y, dtype=np.int64))


def to_canonical(batch: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """A native batch back in canonical layout."""
    x, *rest = batch
    if x.ndim == 4:
        x = image_to_canonical(x)
    elif x.ndim == 3 and np.issubdtype(x.dtype, np.floating):
        x = np.ascontiguousarray(x.transpose(1, 0, 2))  # (T, N, E) -> (N, T, E)
    return (np.asarray(x), *(np.asarray(r) for r in rest))
