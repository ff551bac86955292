"""Canonical weights: drawn once in NumPy from (workload, seed), saved and loaded by canonical name.

Every backend starts from these numbers. Each tensor has its own generator seeded from
``(seed, crc32(name))``, so adding a layer never changes the draws of the others. The file
format is a plain ``.npz`` (no pickles: loaded with ``allow_pickle=False``) holding one array per
canonical name plus ``__meta__``, a JSON string naming the workload, seed and dtype.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zlib
from pathlib import Path

import numpy as np

from rosetta.errors import RosettaError
from rosetta.spec.init import sample
from rosetta.spec.workload import Workload

Params = dict[str, np.ndarray]
_META = "__meta__"


def canonical_weights(workload: Workload, seed: int = 0, dtype: str = "float32") -> Params:
    """All parameters and buffers of ``workload`` drawn from ``seed``, by canonical name; an
    imported model's are its weights file's (the seed does not apply), checked against the
    sha256 its spec states."""
    if workload.weights is not None:
        return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in imported(workload).items()}
    params: Params = {}
    for spec in workload.param_specs:
        rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
        values = sample(spec.init, spec.shape, spec.fan_in, spec.fan_out, rng)
        params[spec.name] = np.ascontiguousarray(values, dtype=dtype)
    return params


def imported(workload: Workload) -> Params:
    """The weights file of an imported workload (``weights: {file, sha256}``), read only if it
    is a regular file beside the spec whose sha256 is the stated one, and checked by name and
    shape against the spec."""
    ref = workload.weights
    assert ref is not None
    path = ref.path
    if path.is_symlink() or not path.is_file():
        raise RosettaError(
            f"{path}: the weights file of workload {workload.name!r} is missing or not a regular "
            "file; re-run `rosetta import` for it"
        )
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise RosettaError(
            f"{path}: sha256 differs from the one workload {workload.name!r} states (the file "
            "changed since it was imported); re-run `rosetta import`"
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files if k != _META}
    except (ValueError, OSError, EOFError) as exc:
        raise RosettaError(f"{path}: not a readable weights .npz ({exc})") from None
    check_weights(workload, arrays, source=str(path))
    return arrays


def save_weights(
    path: str | Path, workload: Workload, params: Params, seed: int | None = None
) -> Path:
    """Write ``params`` to ``path`` (.npz) atomically, after checking them against the spec."""
    check_weights(workload, params)
    path = Path(path)
    meta = {
        "workload": workload.name,
        "seed": seed,
        "dtype": str(next(iter(params.values())).dtype),
    }
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as fh:
        np.savez(fh, **params, **{_META: np.array(json.dumps(meta))})
    os.replace(tmp, path)
    return path


def load_weights(path: str | Path, workload: Workload) -> Params:
    """Read a weights file written by ``save_weights`` and check it against ``workload``."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise RosettaError(f"{path}: weights file not found") from None
    except (ValueError, OSError, EOFError) as exc:
        raise RosettaError(f"{path}: not a readable weights .npz ({exc}); re-create it") from None
    meta = json.loads(str(arrays.pop(_META))) if _META in arrays else {}
    if meta.get("workload", workload.name) != workload.name:
        raise RosettaError(
            f"{path}: holds weights of workload {meta['workload']!r}, not {workload.name!r}"
        )
    check_weights(workload, arrays, source=str(path))
    return arrays


def check_weights(workload: Workload, params: Params, source: str = "weights") -> None:
    """Raise if names or shapes of ``params`` differ from the workload's parameter table."""
    expected = {p.name: p.shape for p in workload.param_specs}
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise RosettaError(
            f"{source}: parameter names differ from workload {workload.name!r}: "
            f"missing {missing[:3]}{'...' if len(missing) > 3 else ''}, "
            f"unexpected {extra[:3]}{'...' if len(extra) > 3 else ''}"
        )
    for name, shape in expected.items():
        if tuple(params[name].shape) != shape:
            raise RosettaError(
                f"{source}: {name} has shape {tuple(params[name].shape)}, expected {shape}"
            )
