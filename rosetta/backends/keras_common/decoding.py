"""A Keras decoder generating, on any engine: the KV cache its layers share, and one step.

:class:`Decoding` is the generation state a model's ``PositionEmbedding`` and causal
``SelfAttention`` layers share (``Ctx.decoding``), as the ``torch`` backend's ``Decoding`` and
the ``jax`` backend's ``Run.decode``: while ``active``, the input holds the positions from
``offset`` on, each attention writes its keys and values into a static cache of the whole
context, ``(N, capacity, heads, d)``, at ``offset`` (``keras.ops.slice_update``) and reads every
slot up to the query's position, and the position embedding reads its table from ``offset``.

:func:`generate_step` is the one step every Keras backend runs inside its fast path (a
``tf.function`` on TensorFlow, a jitted stateless call on JAX, the eager call on PyTorch): the
lowered graph over the new positions, the logits of the newest one and its argmax, and the cache
as it is after the step. The prefill is the same step from offset 0 with no cache: the first
write allocates it (zeros, the whole context), so no program takes a cache it did not make. The
values move in and out functionally (the cache is an input and an output of the step), so the
same code runs under a trace, a stateless scope or eagerly; ``offset`` is a Python int on an
eager engine and an int32 scalar tensor in a traced program (one trace for every position).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import keras

from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import Workload

#: a causal attention's cache: keys and values, each (N, capacity, heads, d)
KV = tuple[Any, Any]


class Decoding:
    """The generation state shared by a model's position embedding and causal attentions
    (the module docstring): ``active`` only inside :meth:`step`, which sets ``offset`` (the
    positions already seen), ``capacity`` (the context: the slots a cache holds) and
    ``cache`` (layer name -> :data:`KV`, empty at the prefill)."""

    def __init__(self) -> None:
        self.active = False
        self.offset: Any = 0
        self.capacity = 0
        self.cache: dict[str, KV] = {}

    @contextlib.contextmanager
    def step(self, offset: Any, capacity: int, cache: dict[str, KV] | None) -> Iterator[None]:
        """Generate inside the block: the input's positions start at ``offset``; ``cache``
        is the last step's (None at the prefill: each attention allocates its own)."""
        self.active, self.offset, self.capacity = True, offset, capacity
        self.cache = dict(cache or {})
        try:
            yield
        finally:
            self.active = False

    def write(self, name: str, k: Any, v: Any) -> KV:
        """Layer ``name``'s keys and values of the new positions, ``k``, ``v`` (N, t, heads, d),
        written into its cache at ``offset``; returns the whole cache (N, capacity, heads, d)."""
        if name not in self.cache:  # the prefill: a static cache of the whole context
            n, _, heads, d = keras.ops.shape(k)
            zeros = keras.ops.zeros((n, self.capacity, heads, d), dtype=k.dtype)
            self.cache[name] = (zeros, zeros)
        zero = self.offset * 0  # every index of one type: offset's (an int, or its tensor's)
        at = (zero, self.offset, zero, zero)  # (N, capacity, heads, d): from slot ``offset``
        ck, cv = self.cache[name]
        self.cache[name] = (keras.ops.slice_update(ck, at, k), keras.ops.slice_update(cv, at, v))
        return self.cache[name]

    def readable(self, t: int) -> Any:
        """(t, capacity) bool: query ``i`` (position ``offset + i``) reads the slots ``j <=
        offset + i``, those written so far up to its own; the later slots (zeros) are masked."""
        slots = keras.ops.arange(self.capacity)
        return slots[None, :] <= self.offset + keras.ops.arange(t)[:, None]


def cache_layout(workload: Workload, layer_name: Callable[[str], str]) -> dict[str, tuple]:
    """Each causal attention's cache, by its Keras layer name (``layer_name``, ``Ctx``'s): the
    per-sample shape of its keys and of its values, ``(capacity, heads, d)`` (a traced step's
    input signature, with the batch ``None`` in front)."""
    capacity = int(workload.input.shape[0])  # the context: the position table's length
    return {
        layer_name(op.name): (capacity, op.heads, in_shape[1] // op.heads)
        for op, in_shape, _ in walk(workload.graph, workload.input.shape)
        if isinstance(op, ops.CausalAttention)
    }


def generate_step(
    forward: Callable[[Any], Any],
    decoding: Decoding,
    ids: Any,
    offset: Any,
    capacity: int,
    cache: dict[str, KV] | None = None,
) -> tuple[Any, Any, dict[str, KV]]:
    """The lowered graph ``forward`` over ``ids`` (N, t), the positions from ``offset`` on, with
    the cache of the positions before (``cache``; None at the prefill): the logits of the newest
    position (N, V), its greedy token (N,) int32, and the cache with the new keys and values."""
    with decoding.step(offset, capacity, cache):
        logits = forward(ids)[:, -1]  # (N, t, V) -> (N, V): the newest position's
        return logits, keras.ops.cast(keras.ops.argmax(logits, axis=-1), "int32"), decoding.cache
