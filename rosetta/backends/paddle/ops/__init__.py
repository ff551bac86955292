"""The ops of the spec in Paddle: one module per op, found by its name (``rosetta.backends.driver
.discover``). Each holds ``build`` (the ``paddle.nn`` layer; imports Paddle itself, through
``compat``), ``render`` (the same layer as ``paddle.nn`` source text) and, for an op with
parameters, ``weights`` (its canonical tensors bound to the layer's, with the layout
conversions). This package imports no framework; below, the text helpers several ops share.
"""

from __future__ import annotations

#: op name -> why this backend does not lower it (none: every op of the spec is lowered)
UNSUPPORTED: dict[str, str] = {}


def pair(p: tuple[int, int]) -> str:
    """A kernel or stride as Paddle's source writes it: ``3`` for (3, 3), else ``(3, 2)``."""
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def padding_arg(padding: tuple[int, int, int, int]) -> int | tuple[int, int] | list[int]:
    """The spec's ``(top, bottom, left, right)`` as Paddle's ``padding``: an int or an
    ``(h, w)`` pair where symmetric, else the list ``[top, bottom, left, right]``."""
    t, b, left, right = padding
    if t == b and left == right:
        return t if t == left else (t, left)
    return [t, b, left, right]


def pad_text(padding: tuple[int, int, int, int]) -> str:
    """:func:`padding_arg` as source text."""
    arg = padding_arg(padding)
    if isinstance(arg, list):
        return str(arg)
    return pair(arg) if isinstance(arg, tuple) else str(arg)


def bn_momentum(momentum: float) -> float:
    """The spec's BatchNorm momentum (PyTorch's: ``new = (1 - m) old + m batch``) in Paddle's
    convention (``new = m old + (1 - m) batch``)."""
    return round(1.0 - momentum, 12)
