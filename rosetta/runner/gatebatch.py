"""The gate's batch: chosen from the cell's own test data to contain what real data contains.

A batch of random samples rarely holds the cases where backends legitimately or wrongly differ:
exact zeros (a black border or patch makes a conv's pre-activation exactly 0 with the canonical
zero biases, where ReLU's gradient convention shows), saturated pixels, flat regions (ties in a
max-pool window), reviews that are mostly padding or cut at the window. So the gate takes, from
the test samples it is given, the most extreme sample for each such trait (first in order on
ties), then fills the batch with the first samples in order. Deterministic: the same data gives
the same batch, in every backend.
"""

from __future__ import annotations

import numpy as np


def _image_traits(x: np.ndarray) -> list[np.ndarray]:
    """Per image (N, C, H, W): fraction of exact zeros, of saturated pixels, and of flat
    neighbours (equal horizontally adjacent pixels, which make max-pool ties)."""
    flat = x.reshape(len(x), -1)
    zeros = (flat == 0).mean(axis=1)
    saturated = (flat == flat.max(initial=0.0)).mean(axis=1) if flat.size else zeros
    ties = (x[..., 1:] == x[..., :-1]).reshape(len(x), -1).mean(axis=1)
    return [zeros, saturated, ties]


def _token_traits(x: np.ndarray) -> list[np.ndarray]:
    """Per review (N, T): padding (zeros), no padding (cut at the window), repeated tokens."""
    pad = (x == 0).mean(axis=1)
    repeats = (x[:, 1:] == x[:, :-1]).mean(axis=1)
    return [pad, -pad, repeats]


def gate_indices(x: np.ndarray, n: int) -> np.ndarray:
    """``n`` distinct sample indices of ``x``: the extreme sample of each trait, then the first
    ones in order."""
    x = np.asarray(x)
    n = min(n, len(x))
    traits = _token_traits(x) if np.issubdtype(x.dtype, np.integer) else _image_traits(x)
    chosen: list[int] = []
    for score in traits:
        i = int(np.argmax(score))  # the first maximum: deterministic
        if i not in chosen and len(chosen) < n:
            chosen.append(i)
    for i in range(len(x)):
        if len(chosen) == n:
            break
        if i not in chosen:
            chosen.append(i)
    return np.array(sorted(chosen))
