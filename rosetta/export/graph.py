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

The *generation graph* (:func:`generation_model`, ``Build.decoding``) is a second export of a
decoder for greedy decoding with a KV cache, one graph for the prefill and every decode step:
``input`` (N, T) and per causal attention layer ``i`` ``past_key_<i>``/``past_value_<i>`` (N,
heads, S, d) in; ``output`` (N, V), the last position's logits, and ``present_key_<i>``/
``present_value_<i>`` (N, heads, S + T, d), the pasts with the new keys and values appended,
out. S is read from the first past's shape (:func:`steps`): the position embedding gathers rows
S..S+T-1 (``Range``), and the causal mask is a (T, S + T) 0 / -inf bias from ``Range`` and
``Greater`` (query ``i`` reads key ``j <= S + i``). The ops after the last causal attention's
block (the final LayerNorm, the tied head) run on the last position alone.
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
from rosetta.spec.graph import infer_shape, walk

#: the graph's input and output tensor names (the engines feed and read these)
INPUT, OUTPUT = "input", "output"
#: the generation graph's KV cache, per causal attention layer ``i`` in graph order: the pasts
#: read (N, heads, S, d) and the presents written (N, heads, S + T, d)
PAST_KEY, PAST_VALUE = "past_key_{}", "past_value_{}"
PRESENT_KEY, PRESENT_VALUE = "present_key_{}", "present_value_{}"
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
    #: emitting the generation graph (:func:`generation_model`): causal attention reads and
    #: writes a KV cache, the position embedding starts at the cache's length
    decoding: bool = False
    caches: int = 0  # the causal attention layers emitted so far (the next one's cache index)

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

    def named(self, out: str, op_type: str, inputs: list[str], **attrs) -> str:
        """Append a node with one output named ``out`` (a graph output): ``out``."""
        self.node(op_type, inputs, **attrs)
        self.nodes[-1].output[0] = out
        return out


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


def steps(b: Build, piece: str) -> str:
    """The generation graph's positions (:func:`generation_model`), made once per graph from
    the shapes of the token input (N, T) and of the first layer's cached keys (N, heads, S, d):
    ``past`` S and ``new`` T (int64 scalars), ``end`` S + T, ``query`` (T,) the new tokens'
    positions S..S+T-1 (the position embedding's rows), ``bias`` (T, S + T) the causal mask of
    the new queries over the cached and the new keys: 0 where key ``j <= S + i``, -inf after
    (every row keeps its own key: never all -inf)."""
    if piece in b.memo:
        return b.memo[piece]
    if piece == "past":
        dims = b.one("Shape", [PAST_KEY.format(0)])  # (4,): N, heads, S, d
        y = b.one("Gather", [dims, b.const("gen_index2", 2, "int64")], axis=0)
    elif piece == "new":
        dims = b.one("Shape", [INPUT])  # (2,): N, T
        y = b.one("Gather", [dims, b.const("gen_index1", 1, "int64")], axis=0)
    elif piece == "end":
        y = b.one("Add", [steps(b, "past"), steps(b, "new")])
    elif piece == "query":  # (T,)
        y = b.one("Range", [steps(b, "past"), steps(b, "end"), b.const("gen_one", 1, "int64")])
    elif piece == "bias":
        keys = b.one("Range", [b.const("gen_zero", 0, "int64"), steps(b, "end"),
                               b.const("gen_one", 1, "int64")])  # (S + T,)  # fmt: skip
        keys = b.one("Unsqueeze", [keys, b.const("axes0", [0], "int64")])  # (1, S + T)
        query = b.one("Unsqueeze", [steps(b, "query"), b.const("axes1", [1], "int64")])  # (T, 1)
        later = b.one("Greater", [keys, query])  # (T, S + T): key j > query position S + i
        y = b.one("Where", [later, b.const("minus_inf", -np.inf), b.const("zero", 0)])
    else:
        raise ValueError(f"no generation piece {piece!r}")
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


def _output(b: Build, y: str) -> None:
    """Name tensor ``y`` the graph's output: the last node's own output where it writes ``y``,
    else (an empty graph, or a last op that emits nothing) one ``Identity``."""
    if not (b.nodes and y == b.nodes[-1].output[0]):
        b.one("Identity", [y])
    b.nodes[-1].output[0] = OUTPUT


def _model(
    b: Build, workload, params: dict, opset: int, inputs: list, outputs: list, doc: str
) -> onnx.ModelProto:
    """The ``ModelProto`` of ``b``'s nodes, ``params`` and ``b``'s constants as initializers."""
    inits = {**to_initializers(workload, params, b.dtype), **b.constants}
    graph = helper.make_graph(
        b.nodes,
        "rosetta",
        inputs,
        outputs,
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
        doc_string=f"{doc}, opset {opset}",
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="rosetta",
        producer_version=rosetta.__version__,
    )
    model.ir_version = min(model.ir_version, 10)  # what onnxruntime 1.2x and OpenVINO read
    return model


def _checked_args(workload, dtype: str, opset: int) -> None:
    """One line where the export cannot write ``workload`` in ``dtype`` at ``opset``."""
    check_opset(opset)
    if dtype not in ("float32", "float64"):
        raise BackendError(f"ONNX export: dtype {dtype!r}; valid: float32, float64")
    _lowerable(workload.graph, opset)


def to_model(workload, params: dict, dtype: str = "float32", opset: int = OPSET) -> onnx.ModelProto:
    """``workload``'s evaluation graph with ``params`` (canonical) as initializers, in ``dtype``,
    at ``opset``: a ``ModelProto`` that passed :func:`check`."""
    _checked_args(workload, dtype, opset)
    b = Build(dtype=dtype)
    emit = driver.lower(TABLE, workload.graph, workload.input.shape, b)
    _output(b, emit(b, INPUT))
    in_elem = ELEM["int32"] if workload.input.dtype == "int32" else ELEM[dtype]
    model = _model(
        b,
        workload,
        params,
        opset,
        [_value_info(INPUT, in_elem, tuple(workload.input.shape))],
        [_value_info(OUTPUT, ELEM[dtype], tuple(workload.output_shape))],
        "the evaluation graph of a Rosetta workload",
    )
    check(model, tuple(workload.output_shape))
    return model


#: ops that act on each position alone: the top-level nodes after the last one holding any
#: other op (the decoder's final LayerNorm and tied head) run in the generation graph on the
#: last position only (the LM head's (E, V) product once, not T times)
POSITIONWISE = (ops.LayerNorm, ops.Dense, ops.TiedDense, ops.GELU, ops.Dropout, ops.ReLU,
                ops.Tanh, ops.Sigmoid)  # fmt: skip


def cache_shapes(workload) -> list[tuple[int, int]]:
    """Each causal attention layer's ``(heads, d)`` in graph order: its cache is (N, heads, S,
    d) (the generation graph's ``past_key_<i>``/``past_value_<i>``)."""
    return [
        (op.heads, in_shape[-1] // op.heads)
        for op, in_shape, _ in walk(workload.graph, workload.input.shape)
        if isinstance(op, ops.CausalAttention)
    ]


def _positionwise(node) -> bool:
    """Whether ``node`` (a residual's branches, a wired graph's nodes opened) acts on each
    position alone."""
    if isinstance(node, ops.Residual):
        return all(map(_positionwise, [*node.body, *node.shortcut]))
    if isinstance(node, ops.Graph):
        return all(map(_positionwise, node.nodes))
    return isinstance(node, POSITIONWISE)


def _last_mixing(workload) -> int:
    """The top-level index from which every op is position-wise (:data:`POSITIONWISE`)."""
    cut = len(workload.graph)
    while cut > 0 and _positionwise(workload.graph[cut - 1]):
        cut -= 1
    return cut


def generation_model(
    workload, params: dict, dtype: str = "float32", opset: int = OPSET
) -> onnx.ModelProto:
    """``workload``'s *generation graph*: one graph for the prefill and every decode step of
    greedy decoding with a KV cache (the usual ONNX form). Inputs ``input`` (N, T) int32 token
    ids and, per causal attention layer ``i``, ``past_key_<i>``/``past_value_<i>`` (N, heads, S,
    d), S dynamic (0 at the prefill); outputs ``output`` (N, V), the logits at the last position
    only, and ``present_key_<i>``/``present_value_<i>`` (N, heads, S + T, d), the pasts with the
    new positions' keys and values appended. The positions are S..S+T-1 (:func:`steps`), the
    causal mask (T, S + T) lets query ``i`` read keys ``j <= S + i``. The ops after the last
    sequence-mixing one (the final LayerNorm, the tied head) run on the last position alone.
    Checked as :func:`to_model`'s graph is (:func:`check`)."""
    _checked_args(workload, dtype, opset)
    caches = cache_shapes(workload)
    if workload.input.dtype != "int32" or not caches:
        raise BackendError(
            f"ONNX export: workload {workload.name!r} does not generate (a generation graph "
            "needs token ids and a causal attention to cache)"
        )
    b = Build(dtype=dtype, decoding=True)
    cut = _last_mixing(workload)
    head, tail = workload.graph[:cut], workload.graph[cut:]
    mid = infer_shape(head, workload.input.shape)  # (T, E)
    y = driver.lower(TABLE, head, workload.input.shape, b)(b, INPUT)  # (N, T, E)
    last = b.one("Sub", [steps(b, "new"), b.const("gen_one", 1, "int64")])
    y = b.one("Gather", [y, last], axis=1)  # (N, E): the last position
    y = driver.lower(TABLE, tail, mid[1:], b, at_input=False)(b, y)  # (N, V)
    _output(b, y)
    assert b.caches == len(caches), (b.caches, len(caches))
    elem = ELEM[dtype]

    def kv(names: tuple[str, str], length: str) -> list:
        return [
            helper.make_tensor_value_info(name.format(i), elem, ["N", h, length, d])
            for i, (h, d) in enumerate(caches)
            for name in names
        ]

    out_shape = tuple(infer_shape(tail, mid[1:]))
    model = _model(
        b,
        workload,
        params,
        opset,
        [helper.make_tensor_value_info(INPUT, ELEM["int32"], ["N", "T"]),
         *kv((PAST_KEY, PAST_VALUE), "S")],
        [_value_info(OUTPUT, elem, out_shape), *kv((PRESENT_KEY, PRESENT_VALUE), "S+T")],
        "the generation graph (KV cache) of a Rosetta workload",
    )  # fmt: skip
    check(model, out_shape)
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
