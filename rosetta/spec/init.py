"""Initialisers: how the spec says a tensor's first values are drawn, and the drawing itself.

An ``Init`` is data (``dist`` plus its arguments); ``sample`` turns it into numbers with a
NumPy generator. Variance-scaling initialisers read ``fan_in``/``fan_out`` from the parameter's
canonical layout (conv ``OIHW``: fan_in = I*KH*KW, fan_out = O*KH*KW; dense ``IO``: I and O).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: dist -> the arguments it takes (all floats unless named in _STR_ARGS) and their defaults
DISTS: dict[str, dict[str, object]] = {
    "zeros": {},
    "ones": {},
    "constant": {"value": 0.0},
    "uniform": {"low": -0.05, "high": 0.05},
    "normal": {"mean": 0.0, "std": 0.05},
    "glorot_uniform": {},  # U(-a, a), a = sqrt(6 / (fan_in + fan_out))
    "he_normal": {"mode": "fan_in"},  # N(0, 2 / fan), untruncated (PyTorch's kaiming_normal_)
    "orthogonal": {"gain": 1.0},  # QR of a standard normal matrix, sign-corrected
    "file": {},  # the workload's weights file holds the values (an imported model): never drawn
}
_STR_ARGS = {"mode": ("fan_in", "fan_out")}


@dataclass(frozen=True)
class Init:
    """An initialiser: a distribution name and its arguments (sorted name/value pairs)."""

    dist: str
    args: tuple[tuple[str, object], ...] = field(default=())

    def arg(self, name: str) -> object:
        """The value of argument ``name`` (or its default)."""
        return dict(self.args).get(name, DISTS[self.dist][name])


def make_init(dist: str, **args: object) -> Init:
    """Build a validated ``Init``; raises ``ValueError`` naming a wrong dist or argument."""
    if dist not in DISTS:
        raise ValueError(f"unknown initialiser {dist!r}; expected one of {sorted(DISTS)}")
    for key, value in args.items():
        if key not in DISTS[dist]:
            raise ValueError(
                f"initialiser {dist!r} takes {sorted(DISTS[dist]) or 'no arguments'}, got {key!r}"
            )
        if key in _STR_ARGS:
            if value not in _STR_ARGS[key]:
                raise ValueError(f"{dist}.{key} must be one of {_STR_ARGS[key]}, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{dist}.{key} must be a number, got {value!r}")
    return Init(dist, tuple(sorted(args.items())))


def sample(
    init: Init, shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator
) -> np.ndarray:
    """Draw a float64 array of ``shape`` from ``init`` (callers cast to their dtype)."""
    d = init.dist
    if d == "zeros":
        return np.zeros(shape)
    if d == "ones":
        return np.ones(shape)
    if d == "constant":
        return np.full(shape, float(init.arg("value")))
    if d == "uniform":
        return rng.uniform(float(init.arg("low")), float(init.arg("high")), size=shape)
    if d == "normal":
        return rng.normal(float(init.arg("mean")), float(init.arg("std")), size=shape)
    if d == "glorot_uniform":
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, size=shape)
    if d == "he_normal":
        fan = fan_in if init.arg("mode") == "fan_in" else fan_out
        return rng.normal(0.0, np.sqrt(2.0 / fan), size=shape)
    if d == "orthogonal":
        return float(init.arg("gain")) * _orthogonal(shape, rng)
    if d == "file":
        raise ValueError("init 'file': the values are the workload's weights file, not drawn")
    raise AssertionError(f"unhandled initialiser {d}")  # make_init validated the name


def _orthogonal(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Orthogonal matrix of a 2-D ``shape`` (rows x cols): orthonormal rows if rows <= cols,
    orthonormal columns otherwise (the (H, 3H) recurrent kernel gets orthonormal rows)."""
    rows, cols = shape[0], int(np.prod(shape[1:]))
    a = rng.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)  # q: (max, min), orthonormal columns
    q = q * np.sign(np.diag(r))  # make the decomposition unique
    if rows < cols:
        q = q.T  # (rows, cols) with orthonormal rows
    return q.reshape(shape)
