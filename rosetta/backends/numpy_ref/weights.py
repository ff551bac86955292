"""The reference holds weights in the canonical layouts themselves: no conversion, only a copy
in the model's dtype (so that a round trip is exact and the caller's arrays are never updated
in place by the optimiser)."""

from __future__ import annotations

import numpy as np

from rosetta.spec.weights import check_weights


def load(workload, params: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """Checked canonical weights as the reference's own arrays (copies, in ``dtype``)."""
    check_weights(workload, params)
    return {k: np.array(v, dtype=dtype) for k, v in params.items()}


def read(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's weights as canonical arrays (copies)."""
    return {k: v.copy() for k, v in params.items()}
