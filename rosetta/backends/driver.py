"""The one lowering driver: walks a spec graph and asks a backend's table for each op.

ONNX's reference evaluator has one small function per op and one loop that feeds them; Keras 3
gives every backend the same function names. Rosetta takes both: the walk over a graph (shape
threading, residual blocks, the error for an op a backend cannot lower) is written here once,
and each backend's ``lowering.py`` supplies only a :class:`LoweringTable`: one entry per op,
all under one signature, plus how to chain entries into a sequence and how to join a residual
block's two branches.

A table entry is ``entry(op, site, ctx) -> layer``:

- ``op`` is the spec's op (``rosetta.spec.ops``), its attributes the explicit numbers;
- ``site`` says where it sits: per-sample canonical input and output shapes, whether it reads
  the sequence's own input (so it must not overwrite it in place), and its path in the graph;
- ``ctx`` is the backend's build context (dtype, layout, a parameter binder, an rng...);
- ``layer`` is whatever the framework composes: an ``nn.Module``, a Keras layer, a pure
  function of ``(params, x)``, a Chainer link, a NumPy closure.

A backend's ``lowering.py`` is then read as "the Rosetta of that framework": the table, and
nothing about graph walking.

The same walk renders source: a backend's ``source.py`` holds a second face of its table (a
:class:`LoweringTable` whose entries return :class:`rosetta.backends.snippet.Snippet` text, not
layers), and ``lower(..., on_op=hook)`` hands each op's result to ``hook`` as it goes, which is
how ``rosetta code`` collects the rows of the report's Rosetta page. There is no other walker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rosetta.errors import BackendError
from rosetta.spec import ops
from rosetta.spec.ops import Shape

L = TypeVar("L")  # a backend's native layer


@dataclass(frozen=True)
class Site:
    """Where one op sits in the graph being lowered."""

    in_shape: Shape  # per-sample canonical input shape, e.g. (3, 32, 32) or (150,)
    out_shape: Shape  # per-sample canonical output shape
    at_input: bool  # reads the input of its sequence (the caller's batch or a shared branch input)
    path: str = ""  # e.g. "3" or "4.body.2": index in the graph, residual branches opened

    @property
    def depth(self) -> int:
        """How many residual branches are open around this op (0 at the top level)."""
        return sum(part in ("body", "shortcut") for part in self.path.split("."))


@dataclass(frozen=True)
class LoweringTable(Generic[L]):
    """A backend's lowering: its op entries and its two ways of composing them."""

    backend: str
    entries: Mapping[type, Callable[[Any, Site, Any], L]]
    sequence: Callable[[list[L], Site, Any], L]  # layers in order -> one layer
    residual: Callable[[L, L, Site, Any], L]  # body, shortcut -> body(x) + shortcut(x)

    def entry(self, op: object) -> Callable[[Any, Site, Any], L]:
        """The entry for ``op``, or the contract's error naming the backend and the op."""
        fn = self.entries.get(type(op))
        if fn is None:
            raise unsupported(self.backend, op, self.entries)
        return fn


#: ``on_op(path, op, site, result)``: called by :func:`lower` for every op, in graph order
OnOp = Callable[[str, Any, Site, Any], None]


@dataclass(frozen=True)
class Entry:
    """One op of a backend's table, with both faces: ``build`` names the function of the
    backend's ``lowering.py`` that makes the native layer (a name, so the table loads without
    the framework), ``render`` is the function that writes the same layer as source text."""

    build: str  # e.g. "conv2d": lowering.conv2d(op, site, ctx) -> native layer
    render: Callable[[Any, Site, Any], Any]  # source.conv2d(op, site, ctx) -> Snippet


@dataclass(frozen=True)
class OpTable:
    """A backend's one op table (declared once, in its framework-free ``source.py``): every
    op's :class:`Entry`, and how to chain a sequence and join a residual block, each with both
    faces. The driver walks either face as a :class:`LoweringTable`."""

    backend: str
    entries: Mapping[type, Entry]
    sequence: Entry
    residual: Entry
    #: source text of the functions the rendered lines call, by name (``Snippet.helpers``)
    helpers: Mapping[str, str] = field(default_factory=dict)

    def rendering(self) -> LoweringTable:
        """The source face (text only): what ``rosetta code`` walks."""
        return LoweringTable(
            self.backend,
            {op: e.render for op, e in self.entries.items()},
            self.sequence.render,
            self.residual.render,
        )

    def lowering(self, namespace: Mapping[str, Any]) -> LoweringTable:
        """The native face: each entry's ``build`` looked up in ``namespace`` (the globals of
        the backend's ``lowering.py``); a name it lacks is one line naming it."""

        def build(e: Entry) -> Callable:
            fn = namespace.get(e.build)
            if not callable(fn):
                raise BackendError(
                    f"backend {self.backend!r}: its op table names the build function "
                    f"{e.build!r}, which its lowering.py does not define"
                )
            return fn

        entries = {op: build(e) for op, e in self.entries.items()}
        return LoweringTable(self.backend, entries, build(self.sequence), build(self.residual))


def unsupported(backend: str, op: object, known: Mapping[type, Any] | None = None) -> BackendError:
    """The error for an op a backend cannot lower (names the backend, the op and, given the
    table's entries, the ops it has)."""
    has = ""
    if known:
        has = "; it has: " + ", ".join(sorted(getattr(t, "OP", t.__name__) for t in known))
    return BackendError(f"backend {backend!r} cannot lower op {type(op).__name__}{has}")


def check_lowerable(table: LoweringTable, nodes: Sequence[object]) -> None:
    """Raise ``unsupported`` for the first op of ``nodes`` (branches opened) the table lacks,
    before anything is built."""
    for node in nodes:
        if isinstance(node, ops.Residual):
            check_lowerable(table, node.body)
            check_lowerable(table, node.shortcut)
        else:
            table.entry(node)


def lower(
    table: LoweringTable[L],
    nodes: Sequence[object],
    in_shape: Shape,
    ctx: Any,
    *,
    at_input: bool = True,
    path: str = "",
    on_op: OnOp | None = None,
) -> L:
    """Lower ``nodes`` (a graph or a branch) to one native layer through ``table``; ``on_op``
    sees each op's own result as it is made (branches opened, in graph order)."""
    check_lowerable(table, nodes)
    layers: list[L] = []
    shape = in_shape
    for i, node in enumerate(nodes):
        here = f"{path}.{i}" if path else str(i)
        out = node.out_shape(shape)
        site = Site(shape, out, at_input and i == 0, here)
        if isinstance(node, ops.Residual):
            body = lower(table, node.body, shape, ctx, path=f"{here}.body", on_op=on_op)
            shortcut = lower(table, node.shortcut, shape, ctx, path=f"{here}.shortcut", on_op=on_op)
            layers.append(table.residual(body, shortcut, site, ctx))
        else:
            layer = table.entry(node)(node, site, ctx)
            if on_op is not None:
                on_op(here, node, site, layer)
            layers.append(layer)
        shape = out
    return table.sequence(layers, Site(in_shape, shape, at_input, path), ctx)


def lower_op(table: LoweringTable[L], op: object, in_shape: Shape, ctx: Any) -> L:
    """One op alone (``run_op``'s path), reading a tensor the caller still holds."""
    return table.entry(op)(op, Site(in_shape, op.out_shape(in_shape), True, "0"), ctx)
