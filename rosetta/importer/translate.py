"""The walk over an ONNX graph's nodes, in their (topological) order, into spec layers.

Each node goes to its rule (``rules.RULES``, keyed by ONNX op type), which reads its inputs from
the :class:`Ctx` (a tensor is a :class:`Value`: the spec layer that makes it and its per-sample
spec shape; or a constant), and either appends a spec layer (``ctx.emit``), aliases its output
to its input (a layout-only node: Identity, Dropout, a Flatten of a flat tensor), folds into the
layer before it (a bias ``Add`` after a ``MatMul``), or raises :class:`Unsupported` with the
reason. :func:`translate` collects every node's outcome into the coverage table before failing,
so one run names every unsupported node type.

The layers are wired by index; :func:`wire` writes ``id`` and ``inputs`` only where the graph
branches (a chain reads as the built-in specs do). Layer names come from the file (its
initializers' or nodes' names), made spec names (``[A-Za-z_][A-Za-z0-9_]*``, at most 64
characters, unique): names in a file are data, never code.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rosetta.spec import ops
from rosetta.spec.init import make_init


class Unsupported(Exception):
    """A node the spec cannot express (yet): the reason, in words."""


@dataclass(frozen=True)
class Value:
    """A tensor of the graph: made by layer ``layer`` (-1: the model's input), of per-sample spec
    shape ``shape``; ``ones`` trailing unit axes ONNX keeps and the spec does not (a global
    average pooling's ``(C, 1, 1)`` is the spec's ``(C,)``)."""

    layer: int
    shape: tuple[int, ...]
    ones: int = 0
    #: how ONNX holds it: "" (N, ...), the spec's own; "ids": the model's token ids (N, T);
    #: "time": a sequence time-major (T, N, E); "state": a recurrent layer's final state
    #: (directions = 1, N, H). Only the rules that know a frame read it (:meth:`Ctx.value`).
    frame: str = ""


#: a frame in words, for the refusal of a rule that does not read it
FRAMES = {
    "ids": "the token ids",
    "time": "a time-major (T, N, E) sequence",
    "state": "a recurrent layer's (1, N, H) state",
}


@dataclass
class Row:
    """One ONNX node type's line of the coverage table."""

    count: int = 0
    became: set[str] = field(default_factory=set)  # spec ops, or "absorbed (...)"
    reason: str = ""  # why it is unsupported ('' when read)


@dataclass
class Ctx:
    """The translation under way: tensors, constants, layers, weights, names, coverage."""

    constants: dict[str, np.ndarray]
    values: dict[str, Value] = field(default_factory=dict)
    layers: list[dict] = field(default_factory=list)  # spec layer mappings, without wiring
    reads: list[tuple[int, ...]] = field(default_factory=list)  # per layer: the layers it reads
    outputs: list[str] = field(default_factory=list)  # per layer: the ONNX tensor it makes
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    consumers: Counter = field(default_factory=Counter)  # tensor name -> nodes reading it
    became: set[str] = field(default_factory=set)  # what the current node became
    batch: int = 1  # the file's batch size (1 where dynamic): what a folded Shape reads

    def value(self, name: str, frames: tuple[str, ...] = ("",)) -> Value:
        """The tensor ``name`` as a value of the graph held in one of ``frames`` (a constant
        here is unsupported, and so is a frame the rule does not read)."""
        if name not in self.values:
            raise Unsupported(f"reads {name[:40]!r} as data, which is a constant or unknown")
        v = self.values[name]
        if v.frame not in frames:
            raise Unsupported(f"reads {FRAMES[v.frame]}, which it does not take")
        return v

    def fold(self, node: Any, compute: Any) -> bool:
        """Shape arithmetic on constants (a recurrent layer's zero state sized from the batch):
        ``node``'s output computed here from its constant inputs, if all of them are."""
        names = [n for n in node.input if n]
        if not names or any(n not in self.constants for n in names):
            return False
        self.constants[node.output[0]] = np.asarray(compute(*(self.constants[n] for n in names)))
        self.became.add("folded (constant arithmetic)")
        return True

    def const(self, name: str) -> np.ndarray:
        """The constant ``name`` (an initializer or a Constant node's output)."""
        if name not in self.constants:
            raise Unsupported(f"needs {name[:40]!r} to be a constant (weights), not computed")
        return self.constants[name]

    def emit(self, op: object, out: str, inputs: list[Value], params: dict | None = None) -> Value:
        """Append spec op ``op`` (a ``rosetta.spec.ops`` instance) reading ``inputs``, making
        tensor ``out``; ``params`` are its canonical weights by role (``kernel``...)."""
        shapes = tuple(v.shape for v in inputs)
        shape = op.out_shape(shapes if ops.is_variadic(op) else shapes[0])
        item = {"op": op.OP, **_fields(op)}
        self.layers.append(item)
        self.reads.append(tuple(v.layer for v in inputs))
        self.outputs.append(out)
        name = getattr(op, "name", None)
        for role, array in (params or {}).items():
            self.weights[f"{name}.{role}"] = np.ascontiguousarray(array, dtype=np.float32)
        value = Value(len(self.layers) - 1, shape)
        self.values[out] = value
        self.became.add(op.OP)
        return value

    def alias(self, out: str, value: Value, why: str) -> None:
        """Tensor ``out`` is ``value`` (a layout-only node)."""
        self.values[out] = value
        self.became.add(f"absorbed ({why})")

    def unique(self, raw: str, fallback: str) -> str:
        """A spec name from a name in the file (module docstring)."""
        base = spec_name(raw) or fallback
        name, k = base, 2
        while name in self.names:
            suffix = f"_{k}"
            name, k = base[: 64 - len(suffix)] + suffix, k + 1
        self.names.add(name)
        return name


def _fields(op: object) -> dict:
    """The YAML fields of a spec op instance (tuples as lists; ``init`` left to the weights
    file; an optional field at its default left out, as a person writes it)."""
    import dataclasses

    from rosetta.spec.fields import op_schema

    schema = op_schema(type(op))
    defaults = {f.name: f.default for f in dataclasses.fields(op)}
    out = {}
    for key in schema.fields:
        value = getattr(op, key)
        if key in schema.optional and value == defaults[key]:
            continue
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")
_SUFFIX = re.compile(
    r"[._](weight|bias|kernel|scale|running_mean|running_var|gamma|beta|mean|var|table|W|B)$"
)


def spec_name(raw: str) -> str:
    """``features.0.weight`` -> ``features_0``; ``/layer1/layer1.0/conv1/Conv`` ->
    ``layer1_0_conv1``; '' where nothing usable remains."""
    text = raw.strip()
    if text.startswith("/") and text.count("/") > 1:  # a torch.onnx name: /scope/.../OpType
        parts = [p for p in text.split("/") if p][:-1]
        parts = [
            p for i, p in enumerate(parts) if not any(q.startswith(p + ".") for q in parts[i + 1 :])
        ]
        text = "_".join(parts)
    text = _SUFFIX.sub("", text)
    text = _UNSAFE.sub("_", text).strip("_")
    if not text:
        return ""
    if not (text[0].isalpha() or text[0] == "_"):
        text = "l_" + text
    return text[:64]


def layer_name(ctx: Ctx, node: Any, weight: str | None, kind: str) -> str:
    """A layer's spec name: its weight's initializer name where that reads as a module path
    (``features.0.weight``), else the node's name, else ``<kind><n>``."""
    candidates = []
    if weight and re.fullmatch(r"[A-Za-z_][\w.]*", weight):
        candidates.append(weight)
    if node.name:
        candidates.append(node.name)
    for raw in candidates:
        if spec_name(raw):
            return ctx.unique(raw, kind)
    return ctx.unique(f"{kind}{len(ctx.layers)}", kind)


@dataclass
class Translation:
    """What the graph became: spec layers (wired), weights by canonical name, coverage."""

    layers: list[dict]
    weights: dict[str, np.ndarray]
    coverage: dict[str, Row]
    output_ones: int  # trailing unit axes the file's output keeps and the spec's does not
    outputs: int = 0  # the output's values per sample

    @property
    def unsupported(self) -> dict[str, Row]:
        """The node types that could not be read."""
        return {k: r for k, r in self.coverage.items() if r.reason}


def translate(source: Any, rules: dict, found: Any = None) -> Translation:
    """Every node of ``source`` (a :class:`rosetta.importer.source.Source`) through its rule in
    ``rules`` (ONNX op type -> rule: ``rosetta.importer.rules.RULES``), except the nodes of a
    region ``found`` recognised as one spec op (:func:`rosetta.importer.patterns.find`): those
    become that op, emitted where the region's output is made."""
    ctx = Ctx(dict(source.constants), batch=source.batch or 1)
    covering = found.covering() if found is not None else {}
    refused = found.refused if found is not None else {}
    frame = "ids" if getattr(source, "input_dtype", "float32") == "int32" else ""
    ctx.values[source.input_name] = Value(-1, source.input_shape, frame=frame)
    graph = source.model.graph
    for node in graph.node:
        for name in node.input:
            ctx.consumers[name] += 1
    coverage: dict[str, Row] = {}
    failed = False
    for index, node in enumerate(graph.node):
        row = coverage.setdefault(node.op_type, Row())
        row.count += 1
        ctx.became = set()
        rule = rules.get(node.op_type)
        region = covering.get(index) if node.op_type != "Constant" else None
        try:
            if index in refused:
                raise Unsupported(refused[index])
            if region is not None:
                if not failed:
                    _region(ctx, node, region)
            elif rule is None:
                raise Unsupported("no rule: the spec has no op for it yet")
            elif not failed:
                rule(ctx, node)
        except Unsupported as exc:
            row.reason = row.reason or str(exc)
            failed = True
        except ValueError as exc:  # a spec op refused the shapes it was given
            row.reason = row.reason or f"its shapes do not fit the spec op: {exc}"
            failed = True
        row.became |= ctx.became
    out = source.output_name
    if failed or out not in ctx.values or ctx.values[out].layer < 0:
        if not failed:
            coverage.setdefault("<output>", Row(1, set(), "the output is not made by any layer"))
        return Translation([], {}, coverage, 0)
    made = ctx.values[out]
    if made.frame:  # an output still time-major, or a state with its direction axis
        coverage.setdefault("<output>", Row(1, set(), f"the output is {FRAMES[made.frame]}"))
        return Translation([], {}, coverage, 0)
    return Translation(
        wire(ctx, made.layer), ctx.weights, coverage, made.ones, int(np.prod(made.shape))
    )


def _region(ctx: Ctx, node: Any, region: Any) -> None:
    """A node of a recognised region: the region's spec op where its output is made, else
    part of it."""
    import dataclasses

    if region.out not in node.output:
        ctx.became.add(f"{region.kind} (part of)")
        return
    x = ctx.value(region.x)
    op = region.op
    if hasattr(op, "name"):
        scope = _scope(node.name, region.weight_names) or region.kind
        init = {role: make_init("file") for role in ("kernel", "bias")}
        op = dataclasses.replace(op, name=ctx.unique(scope, region.kind), init=init)
    ctx.emit(op, region.out, [Value(x.layer, x.shape)], region.params)


def _scope(node_name: str, weights: tuple[str, ...]) -> str:
    """A region's name: the module scope of its last node's torch.onnx name
    (``/enc/layers.0/self_attn/Transpose_7`` -> ``enc_layers_0_self_attn``), else what its
    weights' names share (``block.0.attn.query_kernel``, ... -> ``block_0_attn``)."""
    if node_name.startswith("/") and node_name.count("/") > 1:
        return spec_name(node_name)
    common = os.path.commonprefix(list(weights)) if weights else ""
    return spec_name(common.rsplit(".", 1)[0]) if "." in common else ""


def wire(ctx: Ctx, last: int) -> list[dict]:
    """The layers up to ``last`` (the output's), with ``id``/``inputs`` only where a layer does
    not read the layer before it; unread layers (dead ends) are dropped."""
    keep = set()
    stack = [last]
    while stack:
        j = stack.pop()
        if j < 0 or j in keep:
            continue
        keep.add(j)
        stack.extend(ctx.reads[j])
    order = sorted(keep)
    index = {old: new for new, old in enumerate(order)}
    reads = [tuple(-1 if k < 0 else index[k] for k in ctx.reads[j]) for j in order]
    chain = all(r == (i - 1,) for i, r in enumerate(reads))
    layers = [dict(ctx.layers[j]) for j in order]
    if chain:
        return layers
    needs_id = {k for i, r in enumerate(reads) for k in r if r != (i - 1,) and k >= 0}
    ids: dict[int, str] = {}
    taken = {"input"}
    for k in sorted(needs_id):
        base = layers[k].get("name") or spec_name(ctx.outputs[order[k]]) or f"t{k}"
        ident, n = base, 2
        while ident in taken:
            ident, n = f"{base[:60]}_{n}", n + 1
        taken.add(ident)
        ids[k] = ident
    for i, r in enumerate(reads):
        if i in ids:
            layers[i]["id"] = ids[i]
        if r != (i - 1,):
            layers[i]["inputs"] = ["input" if k < 0 else ids[k] for k in r]
    return layers
