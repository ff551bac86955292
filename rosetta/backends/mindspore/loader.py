"""The native loader: ``mindspore.dataset.GeneratorDataset`` over the shared arrays, in the runner's
order.

A source whose item ``b`` is the whole batch ``b`` of the runner's ``order`` (one NumPy gather per
batch), read by a ``GeneratorDataset`` in order (``shuffle=False``), one worker thread, no
multiprocessing (on this 2-core CPU a worker process competes with the compute threads), last
incomplete batch dropped; ``create_tuple_iterator`` yields MindSpore tensors. The dtype (images in
the model's dtype, token ids int32, labels int32) is set here; the layout is NCHW, the canonical
one, so nothing is permuted.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from rosetta.backends.mindspore.compat import ms


class OrderedBatches:
    """Item ``b``: ``(x[i], y[i])`` (or ``(x[i],)``) for ``i = order[b*bs:(b+1)*bs]``, complete
    batches only, images cast to ``dtype``, ids and labels int32."""

    def __init__(self, x, y, order, batch_size: int, dtype: str) -> None:
        self.x, self.y = x, y
        self.order = np.asarray(order, dtype=np.int64)
        self.batch_size = batch_size
        self.x_dtype = np.dtype(dtype) if np.issubdtype(x.dtype, np.floating) else np.int32

    def __len__(self) -> int:
        return len(self.order) // self.batch_size

    def __getitem__(self, b: int) -> tuple[np.ndarray, ...]:
        if not 0 <= b < len(self):
            raise IndexError(b)
        idx = self.order[b * self.batch_size : (b + 1) * self.batch_size]
        x = np.ascontiguousarray(self.x[idx], dtype=self.x_dtype)  # (B, C, H, W) or (B, T)
        if self.y is None:
            return (x,)
        return x, np.asarray(self.y[idx], dtype=np.int32)


def native_loader(x, y, order, batch_size: int, dtype: str) -> Iterator[tuple]:
    """Native batches ``(x, y)`` or ``(x,)`` of ``x[order]`` as MindSpore tensors."""
    source = OrderedBatches(x, y, order, batch_size, dtype)
    columns = ["x"] if y is None else ["x", "y"]
    data = ms.dataset.GeneratorDataset(
        source, column_names=columns, shuffle=False, num_parallel_workers=1,
        python_multiprocessing=False,
    )  # fmt: skip
    return (tuple(batch) for batch in data.create_tuple_iterator(num_epochs=1))


def request_batch(x: np.ndarray, dtype: str) -> tuple:
    """One request's batch without a pipeline (the dataset's dtype rule, then ``ms.Tensor``)."""
    (xb,) = OrderedBatches(x, None, np.arange(len(x)), len(x), dtype)[0]
    return (ms.Tensor(xb),)


def to_canonical(batch: tuple) -> tuple[np.ndarray, ...]:
    """A native batch back in canonical layout (NCHW is canonical)."""
    return tuple(t.asnumpy() for t in batch)
