"""Walks over a graph (a tuple of nodes, residuals and wired graphs nested): shapes, parameters,
FLOPs.

A tuple of nodes is a chain. Two nodes branch: ``Residual``, whose ``branches`` are chains
themselves, and ``Graph``, a list wired by name whose nodes each read their own inputs
(``node_shapes``). Backends walk it the same way (``rosetta.backends.driver``).
This module knows ops only through the :class:`Op` protocol (``rosetta.spec.ops`` imports it,
never the other way round).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from rosetta.spec.params import ParamSpec, Shape


class Op(Protocol):
    """What every op of ``rosetta.spec.ops`` answers (a branching op also has ``branches``)."""

    def out_shape(self, in_shape: Shape) -> Shape: ...
    def param_specs(self, in_shape: Shape) -> list[ParamSpec]: ...
    def flops(self, in_shape: Shape) -> int: ...


def infer_shape(nodes: Sequence[Op], in_shape: Shape) -> Shape:
    """The per-sample output shape of ``nodes`` applied to ``in_shape``."""
    shape = in_shape
    for node in nodes:
        shape = node.out_shape(shape)
    return shape


def collect_params(nodes: Sequence[Op], in_shape: Shape) -> list[ParamSpec]:
    """Every parameter and buffer of ``nodes``, in graph order."""
    specs: list[ParamSpec] = []
    shape = in_shape
    for node in nodes:
        specs.extend(node.param_specs(shape))
        shape = node.out_shape(shape)
    return specs


def count_flops(nodes: Sequence[Op], in_shape: Shape) -> int:
    """Forward FLOPs per sample of ``nodes`` (conventions in ``rosetta/models/README.md``)."""
    total = 0
    shape = in_shape
    for node in nodes:
        total += node.flops(shape)
        shape = node.out_shape(shape)
    return total


def walk_wired(
    nodes: Sequence[Op], in_shape: Shape, wired: bool = False
) -> Iterator[tuple[Op, Shape, Shape, bool]]:
    """:func:`walk`, each leaf with whether it is a node of a wired graph (its output may be read
    by any later node, not only the next: ``rosetta.backends.driver.Site.wired``)."""
    shape = in_shape
    for node in nodes:
        out = node.out_shape(shape)
        branches = getattr(node, "branches", None)
        shapes = getattr(node, "node_shapes", None)
        if branches is not None:
            for branch in branches:
                yield from walk_wired(branch, shape)
        elif shapes is not None:
            for inner, (arg, _) in zip(node.nodes, shapes(shape), strict=True):
                yield from walk_wired((inner,), arg, wired=True)
        else:
            yield node, shape, out, wired
        shape = out


def walk(nodes: Sequence[Op], in_shape: Shape) -> Iterator[tuple[Op, Shape, Shape]]:
    """Yield ``(node, in_shape, out_shape)`` for every leaf op, depth first, branches opened
    (a variadic op's ``in_shape`` is the tuple of its inputs' shapes)."""
    for node, shape, out, _ in walk_wired(nodes, in_shape):
        yield node, shape, out
