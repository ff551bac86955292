"""The native loader: ``paddle.io.DataLoader`` over the shared arrays, in the runner's order.

A map-style ``paddle.io.Dataset`` whose item ``b`` is the whole batch ``b`` of the runner's
``order`` (one NumPy gather per batch instead of 64 ``__getitem__`` calls and a collate), read
by a ``DataLoader`` with ``batch_size=None`` (the dataset's items are batches already), in order,
last incomplete batch dropped. ``num_workers=0``: on this 2-core CPU a worker process competes
with the compute threads (the torch backend's measurement, ``torch/loader.py``); Paddle's
``use_buffer_reader`` (on, its default) still fills the next batch on a reader thread while the
current step runs. The dtype (images in the model's dtype, token ids and labels int64) is set
here, at the boundary; the layout is NCHW, the canonical one, so nothing is permuted.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from rosetta.backends.paddle.compat import paddle

#: DataLoader worker processes (see the module docstring)
NUM_WORKERS = 0


class OrderedBatches(paddle.io.Dataset):
    """Item ``b``: ``(x[i], y[i])`` (or ``(x[i],)``) for ``i = order[b*bs:(b+1)*bs]``, complete
    batches only, images cast to ``dtype``, ids and labels int64."""

    def __init__(
        self, x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int, dtype: str
    ) -> None:
        super().__init__()
        self.x, self.y = x, y
        self.order = np.asarray(order, dtype=np.int64)
        self.batch_size = batch_size
        self.x_dtype = np.dtype(dtype) if np.issubdtype(x.dtype, np.floating) else np.int64

    def __len__(self) -> int:
        return len(self.order) // self.batch_size

    def __getitem__(self, b: int) -> tuple[np.ndarray, ...]:
        if not 0 <= b < len(self):
            raise IndexError(b)
        idx = self.order[b * self.batch_size : (b + 1) * self.batch_size]
        x = np.ascontiguousarray(self.x[idx], dtype=self.x_dtype)  # (B, C, H, W) or (B, T)
        if self.y is None:
            return (x,)
        return x, np.asarray(self.y[idx], dtype=np.int64)


def native_loader(
    x: np.ndarray,
    y: np.ndarray | None,
    order: np.ndarray,
    batch_size: int,
    dtype: str,
    num_workers: int = NUM_WORKERS,
) -> Iterator[tuple[paddle.Tensor, ...]]:
    """Native batches ``(x, y)`` or ``(x,)`` of ``x[order]`` as Paddle tensors on the current
    place."""
    loader = paddle.io.DataLoader(
        OrderedBatches(x, y, order, batch_size, dtype),
        batch_size=None,  # each item is a batch already
        shuffle=False,
        num_workers=num_workers,
        return_list=True,
    )
    return (tuple(batch) for batch in loader)


def request_batch(x: np.ndarray, dtype: str) -> tuple[paddle.Tensor]:
    """One request's batch without a ``DataLoader`` (the dataset's dtype rule, then
    ``paddle.to_tensor`` on the current place): what a server does with a request. The loader
    per request cost 0.79 ms of the transformer's 5.4 ms batch-1 prediction (15%, measured)."""
    (xb,) = OrderedBatches(x, None, np.arange(len(x)), len(x), dtype)[0]
    return (paddle.to_tensor(xb),)


def to_canonical(batch: tuple[paddle.Tensor, ...]) -> tuple[np.ndarray, ...]:
    """A native batch back in canonical layout (NCHW is canonical)."""
    return tuple(t.numpy() for t in batch)
