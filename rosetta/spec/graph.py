"""Walks over a graph (a tuple of nodes, residuals nested): shapes, parameters, FLOPs.

A graph is sequential; the only branching node is ``Residual``, whose two branches are graphs
themselves. Backends walk it the same way: a sequence of ops, recursing into residuals.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rosetta.spec.ops import Node, ParamSpec, Residual, Shape


def infer_shape(nodes: Sequence[Node], in_shape: Shape) -> Shape:
    """The per-sample output shape of ``nodes`` applied to ``in_shape``."""
    shape = in_shape
    for node in nodes:
        shape = node.out_shape(shape)
    return shape


def collect_params(nodes: Sequence[Node], in_shape: Shape) -> list[ParamSpec]:
    """Every parameter and buffer of ``nodes``, in graph order."""
    specs: list[ParamSpec] = []
    shape = in_shape
    for node in nodes:
        specs.extend(node.param_specs(shape))
        shape = node.out_shape(shape)
    return specs


def count_flops(nodes: Sequence[Node], in_shape: Shape) -> int:
    """Forward FLOPs per sample of ``nodes`` (conventions in ``rosetta.spec.counts``)."""
    total = 0
    shape = in_shape
    for node in nodes:
        total += node.flops(shape)
        shape = node.out_shape(shape)
    return total


def walk(nodes: Sequence[Node], in_shape: Shape) -> Iterator[tuple[Node, Shape, Shape]]:
    """Yield ``(node, in_shape, out_shape)`` for every leaf op, depth first, residuals opened."""
    shape = in_shape
    for node in nodes:
        out = node.out_shape(shape)
        if isinstance(node, Residual):
            yield from walk(node.body, shape)
            yield from walk(node.shortcut, shape)
        else:
            yield node, shape, out
        shape = out
