"""The exporter's native face: the spec's graph emitted as ONNX nodes (imports ``onnx``).

``TABLE`` is ``table.OPS``'s lowering face: each op module's ``build`` (``ops/<op>.py``) returns
an *emitter*, ``emit(b, x) -> y``,
which appends the op's nodes to the graph under construction ``b`` (a :class:`Build`), reading
tensor ``x`` and returning the name of the tensor it wrote; the one driver
(``rosetta.backends.driver.lower``) walks the spec and composes them (a sequence chains them, a
residual block adds its two branches with one ``Add``, a wired graph (:func:`graph`) feeds each
layer the tensors its ``inputs`` name: a variadic op's emitter, ``add``'s or ``concat``'s,
``emit(b, xs) -> y``, reads the list of them). :func:`to_model` turns the emitted nodes,
the canonical weights (``weights.to_initializers``) and the input/output declarations into a
``ModelProto``, which :func:`check` passes through ``onnx.checker`` (full check) and strict shape
inference, comparing the inferred output shape with the spec's.

Dropout emits nothing (the graph is the evaluation form). An op the table lacks, or an opset
below :data:`rosetta.export.MIN_OPSET` (or below the op's own, ``table.MIN_OPSET_OF``), is one line
naming the op (or the opset) and the opset.

The Transformer's ops (their ``ops/`` modules say the same in text): the token mask is made once
per graph from the int input and memoised on the :class:`Build` (``valid``, ``count``, ``key_bias``,
``any_key``), whichever op asks first. Attention adds ``key_bias`` (0 at a real key, -inf at a
padding key) to the scaled scores before ONNX's ``Softmax`` (which subtracts the row maximum:
stable at any logit size), so a masked key's weight is exactly 0; a row of padding only would be
all -inf (NaN), so its keys are all kept instead and its head outputs multiplied by
``any_key = 0``: the spec's rule (output ``bo``), as the reference's. Causal attention is the
same nodes with a constant (T, T) bias instead (0 at key ``j <= i``, -inf after: one initializer
per graph) and no padding mask. The tied head reads the embedding's own table initializer again
(``Transpose`` then ``MatMul``; ``Gemm`` with ``transB=1`` on 2-d): the file holds it once. The
masked mean divides by ``max(count, 1)``: 0 for a row of padding only, never 0/0. GELU is exact,
``0.5 x (1 + erf(x / sqrt 2))``, in the reference's order (the form ONNX Runtime's Gelu fusion
recognises).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

import rosetta
from rosetta.backends import driver
from rosetta.backends.driver import LoweringTable, Site
from rosetta.errors import BackendError
from rosetta.export import MIN_OPSET, OPSET
from rosetta.export.table import MIN_OPSET_OF, OPS
from rosetta.export.weights import to_initializers
from rosetta.spec import ops

#: the graph's input and output tensor names (the engines feed and read these)
INPUT, OUTPUT = "input", "output"
#: the runtime's dtype names as ONNX element types (token ids stay int32: Gather takes them)
ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32}


@dataclass
class Build:
    """The graph under construction: nodes in order and the extra constants they read."""

    nodes: list = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    count: int = 0
    dtype: str = "float32"  # the graph's float type (its float constants and casts)
    memo: dict[str, str] = field(default_factory=dict)  # tensors made once per graph (the mask)

    def const(self, name: str, value, dtype: str | None = None) -> str:
        """A constant initializer ``name`` (in ``dtype``, default the graph's float type)."""
        self.constants.setdefault(name, np.asarray(value, dtype=dtype or self.dtype))
        return name

    def node(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> list[str]:
        """Append one node (named ``<op_type>_<k>``) and return its output tensor names."""
        self.count += 1
        name = f"{op_type}_{self.count}"
        outs = [name] if n_out == 1 else [f"{name}:{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs

    def one(self, op_type: str, inputs: list[str], **attrs) -> str:
        """Append a node with one output and return that output's name."""
        return self.node(op_type, inputs, **attrs)[0]


Emit = Callable[[Build, str], str]  # emit(b, x) -> y: append nodes reading x, return y
#: a variadic op's emitter (``add``, ``concat``): ``emit(b, xs) -> y`` reads its inputs' names
Variadic = Callable[[Build, list[str]], str]


def mask(b: Build, piece: str) -> str:
    """The token mask's ``piece``, made once per graph from the int input (module docstring):
    ``valid`` (N, T) bool and ``weights`` its 1/0 floats, ``count`` (N, 1) real tokens per row,
    ``has_key`` (N, 1) ``count > 0``, ``key_bias`` (N, 1, 1, T) 0 or -inf, ``any_key`` (N, 1, 1)
    1 where the row has a real token, else 0."""
    if piece in b.memo:
        return b.memo[piece]
    elem = ELEM[b.dtype]
    if piece == "valid":
        y = b.one("Not", [b.one("Equal", [INPUT, b.const("token_pad", 0, "int32")])])
    elif piece == "weights":  # (N, T) float: 1 at a real token, 0 at padding
        y = b.one("Cast", [mask(b, "valid")], to=elem)
    elif piece == "count":
        y = b.one("ReduceSum", [mask(b, "weights"), b.const("axes1", [1], "int64")], keepdims=1)
    elif piece == "has_key":  # (N, 1) bool
        y = b.one("Greater", [mask(b, "count"), b.const("zero", 0)])
    elif piece == "key_bias":
        keep = b.one("Or", [mask(b, "valid"), b.one("Not", [mask(b, "has_key")])])
        bias = b.one("Where", [keep, b.const("zero", 0), b.const("minus_inf", -np.inf)])
        y = b.one("Unsqueeze", [bias, b.const("axes12", [1, 2], "int64")])
    elif piece == "any_key":
        has = b.one("Cast", [mask(b, "has_key")], to=elem)
        y = b.one("Unsqueeze", [has, b.const("axes2", [2], "int64")])
    else:
        raise ValueError(f"no mask piece {piece!r}")
    b.memo[piece] = y
    return y


def sequence(layers: list[Emit], site: Site, ctx: Build) -> Emit:
    """The emitters in order, each reading the previous one's output."""

    def emit(b: Build, x: str) -> str:
        for layer in layers:
            x = layer(b, x)
        return x

    return emit


def residual(body: Emit, shortcut: Emit, site: Site, ctx: Build) -> Emit:
    """``Add(body(x), shortcut(x))``; an empty shortcut is ``x`` itself."""
    return lambda b, x: b.one("Add", [body(b, x), shortcut(b, x)])


def graph(layers: list[Emit | Variadic], wiring: driver.Wiring, site: Site, ctx: Build) -> Emit:
    """Layer ``j`` on the tensors of the layers ``wiring.inputs[j]`` (-1: the graph's input
    ``x``), a variadic layer given their list; the last layer's tensor is the graph's. A tensor
    read twice is one name read by two nodes (ONNX's own fan-out: nothing is copied)."""

    def emit(b: Build, x: str) -> str:
        values: list[str] = []
        for layer, src in zip(layers, wiring.inputs, strict=True):
            args = [x if k < 0 else values[k] for k in src]
            values.append(layer(b, args) if len(src) > 1 else layer(b, args[0]))
        return values[-1]

    return emit


TABLE: LoweringTable = OPS.lowering(globals())  # the native face of table.OPS


def check_opset(opset: int) -> int:
    """``opset`` if the exporter can write it, else one line naming the valid range."""
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or isinstance(opset, bool) or not MIN_OPSET <= opset <= newest:
        raise BackendError(
            f"ONNX export: opset {opset!r} is outside what the exporter can write "
            f"({MIN_OPSET}..{newest}: Squeeze takes its axes as an input from opset 13)"
        )
    return opset


def unexpressible(nodes, opset: int = OPSET) -> object | None:
    """The first op of ``nodes`` (residual branches and wired graphs opened) the exporter's table
    lacks, or whose ONNX form needs a newer opset than ``opset`` (``table.MIN_OPSET_OF``), or
    ``None``."""
    for node in nodes:
        if isinstance(node, ops.Residual):
            found = unexpressible(node.body, opset) or unexpressible(node.shortcut, opset)
            if found is not None:
                return found
        elif isinstance(node, ops.Graph):
            found = unexpressible(node.nodes, opset)
            if found is not None:
                return found
        elif type(node) not in TABLE.entries or MIN_OPSET_OF.get(type(node), 0) > opset:
            return node
    return None


def _lowerable(nodes, opset: int) -> None:
    """One line naming the first op the export cannot express, and the opset."""
    op = unexpressible(nodes, opset)
    if op is not None:
        name = getattr(op, "OP", type(op).__name__)
        if type(op) in TABLE.entries:
            need = MIN_OPSET_OF[type(op)]
            raise BackendError(
                f"ONNX export cannot express op {name!r} in opset {opset} (its ONNX form needs "
                f"opset {need}: use --opset {need} or newer)"
            )
        raise BackendError(
            f"ONNX export cannot express op {name!r} in opset {opset} (it has: "
            f"{', '.join(sorted(t.OP for t in TABLE.entries))})"
        )


def _value_info(name: str, elem: int, shape: tuple) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, ["N", *shape])  # N: the batch, any size


def to_model(workload, params: dict, dtype: str = "float32", opset: int = OPSET) -> onnx.ModelProto:
    """``workload``'s evaluation graph with ``params`` (canonical) as initializers, in ``dtype``,
    at ``opset``: a ``ModelProto`` that passed :func:`check`."""
    check_opset(opset)
    if dtype not in ("float32", "float64"):
        raise BackendError(f"ONNX export: dtype {dtype!r}; valid: float32, float64")
    _lowerable(workload.graph, opset)
    b = Build(dtype=dtype)
    emit = driver.lower(TABLE, workload.graph, workload.input.shape, b)
    y = emit(b, INPUT)
    if b.nodes and y == b.nodes[-1].output[0]:  # the last node writes the graph's output
        b.nodes[-1].output[0] = OUTPUT
    else:  # an empty graph (or a last op that emits nothing): one Identity
        b.one("Identity", [y])
        b.nodes[-1].output[0] = OUTPUT
    in_elem = ELEM["int32"] if workload.input.dtype == "int32" else ELEM[dtype]
    inits = {**to_initializers(workload, params, dtype), **b.constants}
    graph = helper.make_graph(
        b.nodes,
        "rosetta",
        [_value_info(INPUT, in_elem, tuple(workload.input.shape))],
        [_value_info(OUTPUT, ELEM[dtype], tuple(workload.output_shape))],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
        doc_string=f"the evaluation graph of a Rosetta workload, opset {opset}",
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="rosetta",
        producer_version=rosetta.__version__,
    )
    model.ir_version = min(model.ir_version, 10)  # what onnxruntime 1.2x and OpenVINO read
    check(model, tuple(workload.output_shape))
    return model


def op_model(op: object, in_shape: tuple, dtype: str, opset: int = OPSET) -> onnx.ModelProto:
    """A graph of one parameter-free op over ``(N, *in_shape)`` (the engines' ``run_op``)."""
    b = Build(dtype=dtype)
    y = driver.lower_op(TABLE, op, in_shape, b)(b, INPUT)
    b.one("Identity", [y])
    b.nodes[-1].output[0] = OUTPUT
    out_shape = op.out_shape(in_shape)
    graph = helper.make_graph(
        b.nodes,
        "rosetta_op",
        [_value_info(INPUT, ELEM[dtype], in_shape)],
        [_value_info(OUTPUT, ELEM[dtype], out_shape)],
        [numpy_helper.from_array(v, k) for k, v in b.constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    check(model, tuple(out_shape))
    return model


def check(model: onnx.ModelProto, out_shape: tuple) -> None:
    """``onnx.checker`` (full check) and strict shape inference; the inferred output must be
    ``(N, *out_shape)``. A failure is one line (it would be the exporter's own bug)."""
    try:
        onnx.checker.check_model(model, full_check=True)
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendError(f"ONNX export failed its check: {first}") from None
    (out,) = [o for o in inferred.graph.output if o.name == OUTPUT]
    dims = tuple(d.dim_value or d.dim_param for d in out.type.tensor_type.shape.dim)
    if dims != ("N", *out_shape):
        raise BackendError(
            f"ONNX export: shape inference gives {dims}, the spec ('N', *{out_shape})"
        )


def node_counts(model: onnx.ModelProto) -> dict[str, int]:
    """How many nodes of each op type the graph holds (the export's summary)."""
    counts: dict[str, int] = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))
