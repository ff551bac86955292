"""The native loader of Keras on PyTorch: the ``torch`` backend's ``DataLoader``
(``rosetta/backends/torch/loader.py``), in the runner's order, complete batches.

Keras' own torch data path (``ArrayDataAdapter.get_torch_dataloader``) is a
``torch.utils.data.DataLoader`` too; the ``torch`` backend's one gathers a whole batch per
index (no per-sample collate), pins and copies one batch ahead on CUDA. Images stay NCHW (the
model's data format), in the model's dtype; token ids and labels are int64.
"""

from __future__ import annotations

import torch

from rosetta.backends.torch.loader import (
    NUM_WORKERS,
    TORCH_DTYPES,
    Placement,
    native_loader,
    to_canonical,
)

__all__ = ["NUM_WORKERS", "Placement", "native_loader", "placement", "to_canonical"]


def placement(device: str, dtype: str) -> Placement:
    """Where a batch lands: the device, the model's float dtype, NCHW (contiguous)."""
    return Placement(torch.device(device), TORCH_DTYPES[dtype], torch.contiguous_format)
