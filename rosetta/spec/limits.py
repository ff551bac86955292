"""Bounds on what a spec file may expand to, so that loading any file is fast and small.

A spec is a file a stranger may hand you. YAML aliases can make a few kilobytes stand for
billions of nodes ("billion laughs"), and ``repeat`` or a huge ``out_channels`` can make a
short file describe a model no machine holds. The loader checks every bound *before* doing the
work it guards and refuses with one line naming the file and the field.

The defaults sit far above the three real workloads (20 to 50 times and more) and low enough
that the pure-Python YAML parser finishes the worst file they admit in a fraction of a second
(the workloads measured: at most 157 leaf layers, 4,650 values copied by blocks, 390 values,
23.6 M parameter and buffer values, 0.8 M values per sample, no aliases, files under 8 kB).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SpecLimits:
    """What one spec may amount to; every count is checked before the work it bounds."""

    max_bytes: int = 100_000  # the file itself
    max_depth: int = 50  # nesting of YAML collections
    max_aliases: int = 1_000  # YAML alias uses (*name)
    max_nodes: int = 5_000  # YAML values, counted as composed and again with aliases expanded
    max_repeat: int = 1_000  # one block instance's `repeat`
    max_expanded: int = 100_000  # YAML values copied while instantiating blocks and defaults
    max_layers: int = 5_000  # leaf ops after instantiating every block
    max_params: int = 2_000_000_000  # parameter and buffer values of the whole model
    max_values: int = 200_000_000  # values of one per-sample activation (the input included)


DEFAULT_LIMITS = SpecLimits()


class TooLarge(Exception):
    """A structure exceeds a bound (the loader turns it into a ``SpecError``); ``recursive``
    when it contains itself, which no bound admits."""

    def __init__(self, recursive: bool = False):
        super().__init__("recursive" if recursive else "too large")
        self.recursive = recursive


def expanded_size(value: Any, cap: int, memo: dict[int, int] | None = None) -> int:
    """How many values ``value`` holds once every shared reference (YAML alias) is expanded.

    Runs in time proportional to the *distinct* objects (sizes are memoised by identity), stops
    with :class:`TooLarge` as soon as the count passes ``cap``, and refuses a structure that
    contains itself (a recursive alias)."""
    memo = {} if memo is None else memo
    active: set[int] = set()

    def size(v: Any) -> int:
        if not isinstance(v, (dict, list)):
            return 1
        key = id(v)
        if key in memo:
            return memo[key]
        if key in active:
            raise TooLarge(recursive=True)
        active.add(key)
        total = 1
        for child in _children(v):
            total += size(child)
            if total > cap:
                raise TooLarge()
        active.discard(key)
        memo[key] = total
        return total

    return size(value)


def _children(v: dict | list) -> Iterator[Any]:
    if isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield x
    else:
        yield from v


def model_bytes(num_values: int, dtype: str) -> int:
    """Bytes a cell needs for its model at the least: parameters, their gradients and two
    optimiser moments in ``dtype`` (Adam's worst case), plus the float64 copy the equivalence
    gate builds for the reference. Activations come on top; this is a floor, not an estimate."""
    itemsize = 8 if dtype == "float64" else 4
    return num_values * (4 * itemsize + 8)


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine (``None`` where the OS does not say)."""
    import os

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
