"""The values every op speaks in: per-sample shapes and the named tensors a model owns."""

from __future__ import annotations

from dataclasses import dataclass

from rosetta.spec.init import Init

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ParamSpec:
    """One named tensor of a model: a trainable parameter or a buffer (BatchNorm statistics)."""

    name: str  # canonical name, "<layer>.<role>", e.g. "conv1.kernel", "layer2.0.bn1.mean"
    shape: Shape
    layout: str  # axis letters, e.g. "OIHW", "IO", "O", "VE", "E3H"
    init: Init
    trainable: bool = True  # False for buffers (not counted as parameters, no gradient)
    fan_in: int = 1  # for variance-scaling initialisers
    fan_out: int = 1


def numel(shape: Shape) -> int:
    """Number of elements of ``shape`` (1 for the empty shape)."""
    n = 1
    for d in shape:
        n *= d
    return n
