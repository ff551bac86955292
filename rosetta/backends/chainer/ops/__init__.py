"""The ops of the spec in Chainer: one module per op, found by its name (``rosetta.backends.driver
.discover``). Each holds ``build`` (the ``chainer.links`` link or ``chainer.functions`` callable;
imports Chainer itself, through ``lowering``), ``render`` (the same layer as Chainer source text)
and, for an op with parameters, its weight conversion: ``to_native(op, params)`` (canonical NumPy
arrays -> ``{link attribute path: array in Chainer's layout}``) and ``to_canonical(op, read)``
(``read(path)`` gives the link's array or gradient -> ``{canonical name: array}``), and where
AdamW may decay some of them ``decay_paths(op)``; ``weights.py`` applies them. This package
imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: op name -> why this backend does not lower it: it lowers every op of the spec
UNSUPPORTED: dict[str, str] = {}

#: ``read(attribute path)`` -> the link's array (or gradient) there, as a host NumPy array
Read = Callable[[str], np.ndarray]


def pair(p: tuple[int, int]) -> str:
    """A kernel, stride or pad as Chainer writes it: ``3`` for (3, 3), else ``(3, 2)``."""
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def symmetric(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    """``(top, bottom, left, right)`` as Chainer's ``(ph, pw)`` when symmetric, else None."""
    t, b, left, right = padding
    return (t, left) if t == b and left == right else None


def explicit_pad(padding: tuple[int, int, int, int], value: str) -> str:
    """The ``F.pad`` line that pads asymmetrically with ``value`` before an unpadded op."""
    t, b, left, right = padding
    return (
        f'{{x}} = F.pad({{x}}, ((0, 0), (0, 0), ({t}, {b}), ({left}, {right})), "constant", '
        f"constant_values={value})  # asymmetric padding"
    )
