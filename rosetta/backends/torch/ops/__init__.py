"""The ops of the spec in PyTorch: one module per op, found by its name (``rosetta.backends.driver
.discover``). Each holds ``build`` (the ``nn`` module; imports torch itself), ``render`` (the same
layer as ``torch.nn`` source text) and, for an op with parameters, ``weights`` (its canonical
tensors bound to the module's, with the layout conversions). This package imports no framework.
"""

from __future__ import annotations

#: op name -> why this backend does not lower it (none: PyTorch lowers every op of the spec)
UNSUPPORTED: dict[str, str] = {}


def pair(p: tuple[int, int]) -> str:
    """A kernel or stride as PyTorch writes it: ``3`` for (3, 3), else ``(3, 2)``."""
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def symmetric(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    """Symmetric ``(top, bottom, left, right)`` -> PyTorch's ``(h, w)``; None if asymmetric."""
    t, b, left, right = padding
    return (t, left) if t == b and left == right else None
