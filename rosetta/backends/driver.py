"""The one lowering driver: walks a spec graph and asks a backend's table for each op.

ONNX's reference evaluator has one small function per op and one loop that feeds them; Keras 3
gives every backend the same function names. Rosetta takes both: the walk over a graph (shape
threading, residual blocks, the error for an op a backend cannot lower) is written here once,
and each backend supplies only its op table.

**An op is one module per backend.** A backend's table is found by convention
(:func:`discover`): its folder ``ops/`` holds one module per op it lowers, named for the op
(``ops/conv2d.py`` lowers ``conv2d``), with the op's two faces and its weight mapping side by
side:

- ``build(op, site, ctx) -> layer``: the native layer (an ``nn.Module``, a Keras layer, a pure
  function of ``(params, x)``, a Chainer link, a NumPy closure); it imports the framework
  itself, so the module loads with NumPy alone;
- ``render(op, site, ctx) -> Snippet``: the same layer as source text
  (:class:`rosetta.backends.snippet.Snippet`), what ``rosetta code`` writes;
- the backend's weight mapping for the op's parameters (its ``weights.py`` reads it from
  :meth:`OpTable.module`).

``op`` is the spec's op (``rosetta.spec.ops``), its attributes the explicit numbers; ``site``
says where it sits (per-sample canonical input and output shapes, whether it reads the
sequence's own input, its path in the graph); ``ctx`` is the backend's build context. The
folder's ``__init__.py`` declares ``UNSUPPORTED = {op: reason}``: an op neither lowered nor
declared is a gap the conformance suite fails (:meth:`OpTable.gaps`). Entry names come from the
op (``op.OP``); no table is spelled out by hand.

A backend's ``source.py`` makes its table (``discover`` plus how it composes a sequence, joins a
residual block's two branches and wires a graph whose layers name their inputs: ``graph(layers,
wiring, site, ctx)``, where a variadic op, ``add`` or ``concat``, reads several) and
``lowering.py`` takes its native face; the driver walks either face as a
:class:`LoweringTable`, and ``lower(..., on_op=hook)`` hands each op's
result to ``hook`` as it goes, which is how ``rosetta code`` collects the rows of the report's
Rosetta page. There is no other walker.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
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
    #: reads the input of its sequence (the caller's batch or a shared branch input), or, in a
    #: wired graph, a value another node reads too: never written in place
    at_input: bool
    path: str = ""  # e.g. "3" or "4.body.2": index in the graph, residual branches opened
    #: a variadic op's (``add``, ``concat``) input shapes, in order (``in_shape`` is the first)
    in_shapes: tuple[Shape, ...] = ()
    #: a node of a wired graph: its output may be read by any later node, not only the next
    #: (a channels-last flatten then flattens in the spec's C, H, W order itself, since no one
    #: dense layer after it can permute its rows)
    wired: bool = False

    @property
    def depth(self) -> int:
        """How many residual branches are open around this op (0 at the top level)."""
        return sum(part in ("body", "shortcut") for part in self.path.split("."))


@dataclass(frozen=True)
class Wiring:
    """How a wired graph's layers read one another (``rosetta.spec.ops.Graph``): layer ``j``
    reads the outputs of the layers ``inputs[j]`` (``-1``: the graph's own input, in order;
    several for a variadic op) and the last layer's output is the graph's."""

    inputs: tuple[tuple[int, ...], ...]
    ids: tuple[str, ...]  # per layer: its YAML ``id`` ("" where none), for names in source

    def consumers(self) -> list[int]:
        """Per layer output (and, last, the graph's input), how many layers read it: what a
        backward pass sums over, and when a value held for later may be dropped."""
        counts = [0] * (len(self.inputs) + 1)
        for src in self.inputs:
            for k in src:
                counts[k] += 1  # k == -1 counts at the end: the graph's input
        return counts


def last_readers(inputs: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """Per layer ``j`` of a graph wired by ``inputs`` (:class:`Wiring`), the values it is the
    last to read (``-1``: the graph's input): what a forward pass may drop once it has run."""
    last: dict[int, int] = {}
    for j, src in enumerate(inputs):
        for k in src:
            last[k] = j
    return tuple(tuple(k for k, j2 in last.items() if j2 == j) for j in range(len(inputs)))


@dataclass(frozen=True)
class LoweringTable(Generic[L]):
    """A backend's lowering: its op entries and its two ways of composing them."""

    backend: str
    entries: Mapping[type, Callable[[Any, Site, Any], L]]
    sequence: Callable[[list[L], Site, Any], L]  # layers in order -> one layer
    residual: Callable[[L, L, Site, Any], L]  # body, shortcut -> body(x) + shortcut(x)
    #: op name -> why the backend does not lower it (its ``UNSUPPORTED``), for the error
    declared: Mapping[str, str] = field(default_factory=dict)
    #: layers, their wiring -> one layer (a wired graph: ``add``, ``concat``, shared inputs);
    #: None where the backend composes no graph (lowering one is then the contract's error)
    graph: Callable[[list[L], Wiring, Site, Any], L] | None = None

    def entry(self, op: object) -> Callable[[Any, Site, Any], L]:
        """The entry for ``op``, or the contract's error naming the backend, the op and, where
        the backend declares it unsupported, why."""
        fn = self.entries.get(type(op))
        if fn is None:
            raise unsupported(self.backend, op, self.entries, self.declared)
        return fn


#: ``on_op(path, op, site, result)``: called by :func:`lower` for every op, in graph order
OnOp = Callable[[str, Any, Site, Any], None]


@dataclass(frozen=True)
class Entry:
    """A composing entry of a backend's table (``sequence``, ``residual`` or ``graph``), with
    both faces:
    ``build`` names the function of the backend's ``lowering.py`` that composes native layers
    (a name, so the table loads without the framework), ``render`` is the function that writes
    the same composition as source text."""

    build: str  # e.g. "sequence": lowering.sequence(layers, site, ctx) -> native layer
    render: Callable[[Any, Site, Any], Any]  # source.sequence(snippets, site, ctx) -> Snippet


#: ops the driver composes itself (a residual block is its branches' sequences and an add):
#: no backend writes an op module for them
STRUCTURAL = frozenset({"residual"})
#: the name :meth:`OpTable.gaps` gives a backend's missing ``graph`` entry (wired graphs)
GRAPH = "graph (a wired graph's composition: source.py's Entry('graph', ...))"


@dataclass(frozen=True)
class OpTable:
    """A backend's one op table, found by convention (:func:`discover`): every op the backend
    lowers is one module ``<backend>/ops/<op>.py`` holding its native build, its source
    rendering and its weight mapping side by side; ``sequence`` and ``residual`` say how to
    compose them. The driver walks either face as a :class:`LoweringTable`."""

    backend: str
    entries: Mapping[type, ModuleType]  # op class -> its module: build(), render(), weights
    sequence: Entry
    residual: Entry
    graph: Entry | None = None  # a wired graph's layers and their Wiring -> one layer
    #: source text of the functions the rendered lines call, by name (``Snippet.helpers``)
    helpers: Mapping[str, str] = field(default_factory=dict)
    #: op name -> why this backend does not lower it (``ops/__init__.py`` ``UNSUPPORTED``)
    unsupported: Mapping[str, str] = field(default_factory=dict)
    package: str = ""  # where its op modules are, e.g. "rosetta.backends.torch.ops"

    def rendering(self) -> LoweringTable:
        """The source face (text only): what ``rosetta code`` walks."""
        return LoweringTable(
            self.backend,
            {op: m.render for op, m in self.entries.items()},
            self.sequence.render,
            self.residual.render,
            self.unsupported,
            self.graph.render if self.graph else None,
        )

    def lowering(self, namespace: Mapping[str, Any]) -> LoweringTable:
        """The native face: each op module's ``build``, and the composing entries looked up in
        ``namespace`` (the globals of the backend's ``lowering.py``); a name it lacks is one
        line naming it."""

        def build(e: Entry) -> Callable:
            fn = namespace.get(e.build)
            if not callable(fn):
                raise BackendError(
                    f"backend {self.backend!r}: its op table names the build function "
                    f"{e.build!r}, which its lowering.py does not define"
                )
            return fn

        entries = {op: m.build for op, m in self.entries.items()}
        return LoweringTable(
            self.backend,
            entries,
            build(self.sequence),
            build(self.residual),
            self.unsupported,
            build(self.graph) if self.graph else None,
        )

    def module(self, op: object) -> ModuleType:
        """The op module of ``op`` (its weight mapping is read from there), or the contract's
        error naming the backend and the op."""
        m = self.entries.get(type(op))
        if m is None:
            raise unsupported(self.backend, op, self.entries)
        return m

    def gaps(self) -> tuple[str, ...]:
        """The ops of the spec this backend neither lowers nor lists as unsupported: each is a
        failure of its conformance (a gap is declared, never silent); and :data:`GRAPH` where
        it lowers a variadic op (``add``, ``concat``) but composes no wired graph to use it in."""
        lowered = {t.OP for t in self.entries}
        missing = tuple(
            n
            for n in ops.OPS
            if n not in STRUCTURAL and n not in lowered and n not in self.unsupported
        )
        variadic = any(ops.is_variadic(t) for t in self.entries)
        return missing + ((GRAPH,) if variadic and self.graph is None else ())


def discover(
    backend: str,
    package: str,
    sequence: Entry,
    residual: Entry,
    helpers: Mapping[str, str] | None = None,
    graph: Entry | None = None,
) -> OpTable:
    """The op table of ``backend`` from the op modules of ``package`` (``<backend>.ops``): each
    module ``<op>.py`` lowers the spec's op of that name (``ops.OPS``) through its ``build(op,
    site, ctx)`` and writes it through its ``render(op, site, ctx)``; a module imports no
    framework at its top (``build`` imports it), so the text face loads with NumPy alone. A
    module's ``HELPERS`` (name -> source text) join ``helpers``. The package's ``UNSUPPORTED``
    (op name -> reason) lists what the backend declares it does not lower. A module named for
    no op, lacking a face, or an op both lowered and declared unsupported is one line."""
    pkg = importlib.import_module(package)
    declared = dict(getattr(pkg, "UNSUPPORTED", {}))
    entries: dict[type, ModuleType] = {}
    merged = dict(helpers or {})
    where = f"backend {backend!r} ({package.replace('.', '/')})"
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        if info.name not in ops.OPS or info.name in STRUCTURAL:
            raise BackendError(
                f"{where}: {info.name}.py names no op of the spec; an op module is named for "
                f"its op ({', '.join(n for n in ops.OPS if n not in STRUCTURAL)})"
            )
        module = importlib.import_module(f"{package}.{info.name}")
        for face in ("build", "render"):
            if not callable(getattr(module, face, None)):
                raise BackendError(f"{where}: {info.name}.py defines no {face}(op, site, ctx)")
        if info.name in declared:
            raise BackendError(
                f"{where}: op {info.name!r} is lowered ({info.name}.py) and listed in "
                "UNSUPPORTED; drop one"
            )
        for name, text in getattr(module, "HELPERS", {}).items():
            if merged.get(name, text) != text:
                raise BackendError(f"{where}: two texts for the helper {name!r}")
            merged[name] = text
        entries[ops.OPS[info.name]] = module
    unknown = sorted(set(declared) - set(ops.OPS))
    if unknown:
        raise BackendError(f"{where}: UNSUPPORTED names no op of the spec: {', '.join(unknown)}")
    return OpTable(backend, entries, sequence, residual, graph, merged, declared, package)


def unsupported(
    backend: str,
    op: object,
    known: Mapping[type, Any] | None = None,
    declared: Mapping[str, str] | None = None,
) -> BackendError:
    """The error for an op a backend cannot lower: names the backend, the op, why (where the
    backend declares it unsupported) and, given the table's entries, the ops it has."""
    name = getattr(op, "OP", type(op).__name__)
    why = f" ({declared[name]})" if declared and name in declared else ""
    has = ""
    if known:
        has = "; it has: " + ", ".join(sorted(getattr(t, "OP", t.__name__) for t in known))
    return BackendError(f"backend {backend!r} cannot lower op {name}{why}{has}")


def check_lowerable(table: LoweringTable, nodes: Sequence[object]) -> None:
    """Raise ``unsupported`` for the first op of ``nodes`` (branches opened) the table lacks,
    before anything is built."""
    for node in nodes:
        if isinstance(node, ops.Residual):
            check_lowerable(table, node.body)
            check_lowerable(table, node.shortcut)
        elif isinstance(node, ops.Graph):
            if table.graph is None:
                raise BackendError(
                    f"backend {table.backend!r} cannot lower a wired graph (layers naming their "
                    "inputs): its op table has no graph entry"
                )
            check_lowerable(table, node.nodes)
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
        layers.append(_node(table, node, site, ctx, on_op))
        shape = out
    return table.sequence(layers, Site(in_shape, shape, at_input, path), ctx)


def _node(table: LoweringTable[L], node: Any, site: Site, ctx: Any, on_op: OnOp | None) -> L:
    """One node of a chain or of a wired graph at ``site``: an op's entry, a residual block
    (its branches' sequences joined by the backend's ``residual``), or a wired graph (its nodes,
    each at its own site, composed by the backend's ``graph``)."""
    here, shape = site.path, site.in_shape
    if isinstance(node, ops.Residual):
        body = lower(table, node.body, shape, ctx, path=f"{here}.body", on_op=on_op)
        shortcut = lower(table, node.shortcut, shape, ctx, path=f"{here}.shortcut", on_op=on_op)
        return table.residual(body, shortcut, site, ctx)
    if isinstance(node, ops.Graph):
        assert table.graph is not None  # check_lowerable said so
        wiring = Wiring(node.inputs, node.ids)
        read = wiring.consumers()  # read[-1]: the graph's input
        layers = []
        for j, (inner, (arg, out)) in enumerate(
            zip(node.nodes, node.node_shapes(shape), strict=True)
        ):
            many = ops.is_variadic(inner)
            first = node.inputs[j][0]
            # a shared input (read by another node too, or the caller's) is never written in
            # place: the site says so as a sequence's first op's does
            shared = read[first] > 1 or (first < 0 and site.at_input)
            inner_site = Site(
                arg[0] if many else arg,
                out,
                shared,
                f"{here}.{j}",
                tuple(arg) if many else (),
                wired=True,
            )
            layers.append(_node(table, inner, inner_site, ctx, on_op))
        return table.graph(layers, wiring, site, ctx)
    layer = table.entry(node)(node, site, ctx)
    if on_op is not None:
        on_op(here, node, site, layer)
    return layer


def lower_op(table: LoweringTable[L], op: object, in_shape: Shape, ctx: Any) -> L:
    """One op alone (``run_op``'s path), reading a tensor the caller still holds."""
    return table.entry(op)(op, Site(in_shape, op.out_shape(in_shape), True, "0"), ctx)
