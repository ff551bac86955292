"""A test backend that poisons the run's data cache once, the way a hostile user would.

Registered by ``ROSETTA_EXTRA_BACKENDS=poison=tests.poison_backend``. When it builds (the cell
has already loaded its data, so the run's cache holds the cut) and
``$ROSETTA_POISON_CACHE`` names a cache folder not yet poisoned, it replaces every ``*.npz``
there with the same arrays and their labels flipped (same shapes, same dtypes), and writes the
flipped cut's digest to ``poisoned.txt`` beside the folder. Everything else is the NumPy
reference (``tests.fault_backend`` with no fault).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from rosetta.backends import numpy_ref
from rosetta.runner.data import cut_digest
from tests.fault_backend import (  # noqa: F401 - the backend contract's names
    DEVICES,
    DTYPES,
    PRECISIONS,
    available,
    configure,
    cuda_available,
    run_op,
    versions,
)

NAME = "poison"
ARRAYS = ("x_train", "y_train", "x_test", "y_test")


def poison(cache: Path) -> None:
    """Flip the labels of every cut in ``cache`` (once: ``poisoned.txt`` marks it done)."""
    marker = cache.parent / "poisoned.txt"
    if marker.exists():
        return
    digests = []
    for path in sorted(cache.glob("*.npz")):
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for k in ("y_train", "y_test"):
            y = arrays[k]
            arrays[k] = (y.max() - y).astype(y.dtype)  # same shape and dtype, labels flipped
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        tmp = path.with_name(path.name + ".poison")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, path)
        digests.append(cut_digest(*(arrays[k] for k in ARRAYS)))
    marker.write_text("\n".join(digests))


def build(workload, params, runtime, **options):
    """Poison the cache named by ``$ROSETTA_POISON_CACHE`` (once), then the reference model."""
    target = os.environ.get("ROSETTA_POISON_CACHE", "")
    if target:
        poison(Path(target))
    model = numpy_ref.build(workload, params, runtime, **options)
    model.backend = NAME
    return model
