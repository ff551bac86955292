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

A backend's ``source.py`` makes its table (``discover`` plus how it composes a sequence and
joins a residual block's two branches) and ``lowering.py`` takes its native face; the driver
walks either face as a :class:`LoweringTable`, and ``lower(..., on_op=hook)`` hands each op's
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
    #: op name -> why the backend does not lower it (its ``UNSUPPORTED``), for the error
    declared: Mapping[str, str] = field(default_factory=dict)

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
    """A composing entry of a backend's table (``sequence`` or ``residual``), with both faces:
    ``build`` names the function of the backend's ``lowering.py`` that composes native layers
    (a name, so the table loads without the framework), ``render`` is the function that writes
    the same composition as source text."""

    build: str  # e.g. "sequence": lowering.sequence(layers, site, ctx) -> native layer
    render: Callable[[Any, Site, Any], Any]  # source.sequence(snippets, site, ctx) -> Snippet


#: ops the driver composes itself (a residual block is its branches' sequences and an add):
#: no backend writes an op module for them
STRUCTURAL = frozenset({"residual"})


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
            self.backend, entries, build(self.sequence), build(self.residual), self.unsupported
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
        failure of its conformance (a gap is declared, never silent)."""
        lowered = {t.OP for t in self.entries}
        return tuple(
            n
            for n in ops.OPS
            if n not in STRUCTURAL and n not in lowered and n not in self.unsupported
        )


def discover(
    backend: str,
    package: str,
    sequence: Entry,
    residual: Entry,
    helpers: Mapping[str, str] | None = None,
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
    return OpTable(backend, entries, sequence, residual, merged, declared, package)


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
