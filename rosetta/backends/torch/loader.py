"""The native loader: ``torch.utils.data.DataLoader`` over the shared arrays, in the runner's order.

A ``TensorDataset`` indexed with a whole batch of indices at once (``batch_size=None`` and a
sampler that yields index tensors: one gather per batch instead of 64 ``__getitem__`` calls and a
collate), an ``OrderedBatches`` sampler that follows the runner's ``order`` and drops the last
incomplete batch. On CUDA the batches are pinned (``pin_memory=True``) and copied with
``non_blocking=True`` one batch ahead, so the next copy overlaps the current step. The layout
change (``channels_last`` where chosen) and the dtype happen here, at the boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

#: DataLoader worker processes: 0. Measured on the 2-core CPU (fastpath_torch.py, loader): an
#: epoch of 32 cnn batches takes 0.29 s with 1 worker vs 0.36 s without, ratio 0.82 [0.38, 2.8]
#: (no clear difference), i.e. ~10 ms a batch against a ~400 ms step: a worker could hide at most
#: ~2.5% and costs a process competing with the two compute threads. On CUDA the batches are
#: pinned and copied one ahead, which overlaps the copy without a worker.
NUM_WORKERS = 0
#: the runtime's dtype names as torch dtypes (images and parameters; token ids are int64)
TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class OrderedBatches(Sampler):
    """Yields ``order[b*bs:(b+1)*bs]`` as an index tensor for each complete batch ``b``."""

    def __init__(self, order: np.ndarray, batch_size: int) -> None:
        self.order = torch.as_tensor(np.asarray(order, dtype=np.int64))
        self.batch_size = batch_size

    def __len__(self) -> int:
        return len(self.order) // self.batch_size

    def __iter__(self) -> Iterator[torch.Tensor]:
        bs = self.batch_size
        for b in range(len(self)):
            yield self.order[b * bs : (b + 1) * bs]


@dataclass(frozen=True)
class Placement:
    """Where and how a batch lands: device, float dtype for images, memory format."""

    device: torch.device
    dtype: torch.dtype
    memory_format: torch.memory_format  # channels_last or contiguous_format (images only)


def native_loader(
    x: np.ndarray,
    y: np.ndarray | None,
    order: np.ndarray,
    batch_size: int,
    place: Placement,
    num_workers: int = NUM_WORKERS,
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Native batches ``(x, y)`` or ``(x,)`` of ``x[order]``, on the device, in the layout."""
    tensors = [torch.from_numpy(np.ascontiguousarray(x))]
    if y is not None:
        tensors.append(torch.from_numpy(np.asarray(y, dtype=np.int64)))
    cuda = place.device.type == "cuda"
    loader = DataLoader(
        TensorDataset(*tensors),
        sampler=OrderedBatches(order, batch_size),
        batch_size=None,  # the sampler yields whole batches of indices
        num_workers=num_workers,
        pin_memory=cuda,
    )
    batches = (_place(b, place) for b in loader)
    return _one_ahead(batches) if cuda else batches


def _place(batch: tuple[torch.Tensor, ...] | list, place: Placement) -> tuple[torch.Tensor, ...]:
    x, *rest = batch
    if x.is_floating_point():  # images (N, C, H, W): dtype and memory format of the model
        x = x.to(place.device, place.dtype, non_blocking=True, memory_format=place.memory_format)
    else:  # token ids (N, T): int64 for nn.Embedding
        x = x.to(place.device, torch.int64, non_blocking=True)
    return (x, *(r.to(place.device, non_blocking=True) for r in rest))


def _one_ahead(batches: Iterator) -> Iterator:
    """Issue the next batch's (asynchronous) copy before handing out the current one."""
    it = iter(batches)
    current = next(it, None)
    while current is not None:
        following = next(it, None)
        yield current
        current = following


def to_canonical(batch: tuple[torch.Tensor, ...]) -> tuple[np.ndarray, ...]:
    """A native batch back in canonical layout (logical NCHW is canonical in any memory format)."""
    return tuple(t.detach().to("cpu").contiguous().numpy() for t in batch)
