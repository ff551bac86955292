"""Regions of an ONNX graph that are one spec op written as many nodes, recognised and then
proven: multi-head self-attention (PyTorch's ``nn.MultiheadAttention`` exports ~90 nodes of
MatMul, Softmax, Reshape, Transpose and shape arithmetic), the exact GELU before opset 20
(``Div``/``Erf``/``Add``/``Mul``/``Mul``) and the mean over a sequence's real tokens
(``Mul``/``ReduceSum``/``Div`` by the count of non-padding ids).

A region is found by its structure, anchored at the node that makes it what it is (the Softmax
between two data MatMuls, the Erf, the ReduceSum of a masked sequence): its data input ``x``,
its output, every node between them (shape arithmetic and the token mask's nodes included), and
the weights by role (attention: the query, key and value projections, packed as one ``(E, 3E)``
matrix or three, told apart by which side of the scores they reach; the output projection after
the softmax). Structure alone does not prove a function, so each candidate is then **checked**:
the region is cut out of the file as its own ONNX model and run by ONNX Runtime on random inputs
(token ids with padding where a mask is read), and compared with the float64 reference's op
(``rosetta.backends.numpy_ref.seq``) with the recovered weights. Tolerance: 1e-4 of the largest
output (float32 against float64 through a few matmuls: measured <= 1e-6, while a wrong head
count, projection order or scale moves it O(1)). Attention's head count is the one that passes
(every divisor of the width is tried). A candidate that fails is refused with its error, on its
anchor's line of the coverage table.

Rows of padding only are not drawn for attention: there PyTorch's softmax over no key gives NaN
where the spec defines 0 (then the output bias); every row in the check has a real token.
A dropped key bias is exact: ``q . (k + b)`` adds ``q . b`` to every key's score alike, which
the softmax cancels (the spec's attention has no key bias).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rosetta.spec import ops

#: the check's bound: max |file - reference| <= RTOL * max |reference| (module docstring)
RTOL = 1e-4
_LAYOUT = {"Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten"}
_DRAWS = 3


@dataclass(frozen=True)
class Region:
    """One spec op found as many nodes: ``nodes`` (indices into the graph's node list) read data
    tensor ``x`` and make ``out``; ``op`` with ``params`` by role; ``error``: the check's."""

    kind: str
    nodes: frozenset[int]
    x: str
    out: str
    op: Any
    params: dict[str, np.ndarray]
    error: float
    weight_names: tuple[str, ...] = ()  # the file's names of its weights (its spec name's source)


@dataclass
class Found:
    """The regions of a graph, and the anchors that looked like one and failed its check."""

    regions: list[Region] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)  # anchor node index -> reason

    def covering(self) -> dict[int, Region]:
        """node index -> the region it belongs to."""
        return {i: r for r in self.regions for i in r.nodes}


class _NotIt(Exception):
    """Not this pattern after all (the node stays with its own rule)."""


class _Refused(Exception):
    """The pattern's shape, but not the spec op's function (or not readable): the reason."""


@dataclass
class Graph:
    """What the pattern search reads of a graph: producers, consumers, constants, and which
    tensors carry data (float input or embedded tokens) and which only the token mask."""

    model: Any
    nodes: list
    constants: dict[str, np.ndarray]
    input_name: str
    ids: bool
    producer: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    const: set[str] = field(default_factory=set)
    data: set[str] = field(default_factory=set)
    mask: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, source: Any) -> Graph:
        g = source.model.graph
        ids = getattr(source, "input_dtype", "float32") == "int32"
        self = cls(source.model, list(g.node), dict(source.constants), source.input_name, ids)
        self.const = set(self.constants)
        (self.mask if ids else self.data).add(source.input_name)
        for i, n in enumerate(self.nodes):
            ins = [t for t in n.input if t]
            for t in ins:
                self.consumers[t].append(i)
            for t in n.output:
                self.producer[t] = i
            if all(t in self.const for t in ins):
                self.const.update(n.output)
            elif any(t in self.data for t in ins) or (
                n.op_type == "Gather" and ins[0] in self.const and ins[1] in self.mask
            ):  # an embedding of the ids is data
                self.data.update(n.output)
            else:
                self.mask.update(n.output)
        return self

    def node(self, tensor: str) -> Any | None:
        i = self.producer.get(tensor)
        return None if i is None else self.nodes[i]

    def only_consumer(self, tensor: str) -> Any | None:
        c = self.consumers.get(tensor, [])
        return self.nodes[c[0]] if len(c) == 1 else None

    def const_value(self, tensor: str) -> np.ndarray | None:
        """A constant's value (an initializer, a Constant node's, through Identity)."""
        if tensor in self.constants:
            return self.constants[tensor]
        n = self.node(tensor)
        if n is None:
            return None
        if n.op_type == "Constant":
            from onnx import helper, numpy_helper

            for a in n.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(helper.get_attribute_value(a))
        if n.op_type == "Identity":
            return self.const_value(n.input[0])
        return None

    def other(self, n: Any, tensor: str) -> str:
        """The other input of binary node ``n``."""
        a, b = n.input[0], n.input[1]
        return b if a == tensor else a

    def between(self, out: str, x: str) -> frozenset[int]:
        """The nodes ``out`` is computed by from ``x``, the token ids and constants; refused
        where it reads another data tensor (a second sequence, a residual stream)."""
        seen: set[int] = set()
        stack = [out]
        while stack:
            t = stack.pop()
            if t == x or t == self.input_name or t not in self.producer:
                continue
            i = self.producer[t]
            if i in seen:
                continue
            if t in self.data and t not in self._after(x):
                raise _Refused(f"reads data other than its input {x[:40]!r}")
            seen.add(i)
            stack.extend(s for s in self.nodes[i].input if s)
        return frozenset(seen)

    def _after(self, x: str) -> set[str]:
        """The tensors computed from ``x`` (memoised per ``x``)."""
        memo = self.__dict__.setdefault("_after_memo", {})
        if x not in memo:
            reach, stack = {x}, [x]
            while stack:
                for i in self.consumers.get(stack.pop(), []):
                    for o in self.nodes[i].output:
                        if o not in reach:
                            reach.add(o)
                            stack.append(o)
            memo[x] = reach
        return memo[x]


# ------------------------------------------------------------------------------------- check


def _submodel(g: Graph, nodes: frozenset[int], x: str, out: str, x_shape: tuple[int, ...]):
    """The region as an ONNX model of its own: inputs ``x`` (float32) and the ids if it reads
    them, output ``out``."""
    import onnx
    from onnx import TensorProto, helper

    keep = [g.nodes[i] for i in sorted(nodes)]
    used = {t for n in keep for t in n.input if t}
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(x_shape))]
    reads_ids = x != g.input_name and g.input_name in used
    if reads_ids:
        inputs += [v for v in g.model.graph.input if v.name == g.input_name]
    inits = [t for t in g.model.graph.initializer if t.name in used]
    graph = helper.make_graph(
        keep, "region", inputs, [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(graph, opset_imports=list(g.model.opset_import))
    model.ir_version = g.model.ir_version
    return onnx.shape_inference.infer_shapes(model), reads_ids


def _draws(g: Graph, x_shape: tuple[int, ...], padding_only_row: bool) -> list[tuple]:
    """Random inputs: x ~ N(0, 1) and token ids with about a third padding (id 0); every row
    keeps a real token unless ``padding_only_row`` (then the last row is padding only)."""
    rng = np.random.default_rng(0)
    n, t = x_shape[0], x_shape[1] if len(x_shape) > 1 else 1
    out = []
    for k in range(_DRAWS):
        x = rng.standard_normal(x_shape).astype(np.float32)
        ids = rng.integers(1, 10, (n, t)) * (rng.random((n, t)) > 0.35)
        ids[np.arange(n), rng.integers(0, t, n)] = 3  # a real token in every row
        if padding_only_row and k == _DRAWS - 1:
            ids[-1] = 0
        out.append((x, ids))
    return out


def _check(g: Graph, nodes, x, out, x_shape, references, padding_only_row=False) -> tuple:
    """The region run by ONNX Runtime against each candidate of ``references`` (a list of
    ``(key, f(x64, valid) -> y64)``): the first key within :data:`RTOL`, and its error; else
    ``(None, smallest error)``."""
    from rosetta.backends.onnxruntime.runtime import session

    model, reads_ids = _submodel(g, nodes, x, out, x_shape)
    try:
        sess = session(model.SerializeToString(), 1)
    except Exception as exc:  # noqa: BLE001 - ORT's many error types: the reason, in words
        raise _Refused(f"cannot be run on its own ({type(exc).__name__})") from None
    dtype = {v.name: v.type.tensor_type.elem_type for v in g.model.graph.input}.get(g.input_name)
    id_type = np.int32 if dtype == 6 else np.int64  # TensorProto.INT32 is 6
    runs = []
    for xs, ids in _draws(g, x_shape, padding_only_row):
        feed = {x: xs, **({g.input_name: ids.astype(id_type)} if reads_ids else {})}
        (theirs,) = sess.run(None, feed)
        runs.append((xs.astype(np.float64), ids != 0, np.asarray(theirs, np.float64)))
    best = math.inf
    for key, f in references:
        err = 0.0
        for x64, valid, theirs in runs:
            ours = f(x64, valid)
            if ours.shape != theirs.shape:
                err = math.inf
                break
            scale = max(float(np.abs(ours).max()), 1e-30)
            err = max(err, float(np.abs(ours - theirs).max()) / scale)
        if err <= RTOL:
            return key, err
        best = min(best, err)
    return None, best


# ------------------------------------------------------------------------------ attention


def _proj(g: Graph, n: Any) -> tuple[np.ndarray, str] | None:
    """A MatMul/Gemm by a constant: its kernel in the spec's IO layout and its data input."""
    if n is None or n.op_type not in ("MatMul", "Gemm"):
        return None
    w = g.const_value(n.input[1])
    if w is None or w.ndim != 2 or n.input[0] not in g.data:
        return None
    if n.op_type == "Gemm":
        from rosetta.importer.rules import attrs

        a = attrs(n)
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            return None
        w = w.T if a.get("transB", 0) else w
    return w, n.input[0]


def _gemm_bias(g: Graph, n: Any) -> np.ndarray | None:
    if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2]:
        return g.const_value(n.input[2])
    return None


def _find_projs(g: Graph, start: str) -> list[int]:
    """The projections (MatMul/Gemm by a constant) a side of the scores reads, walking back
    through its data tensors."""
    found, seen, stack = [], set(), [start]
    while stack:
        t = stack.pop()
        i = g.producer.get(t)
        if i is None or i in seen or t not in g.data:
            continue
        seen.add(i)
        n = g.nodes[i]
        if _proj(g, n) is not None:
            found.append(i)
            continue
        stack.extend(s for s in n.input if s)
    return found


def _bias_after(g: Graph, i: int) -> np.ndarray | None:
    """A projection's bias: Gemm's C, or an Add of a constant right after the MatMul."""
    n = g.nodes[i]
    b = _gemm_bias(g, n)
    if b is not None:
        return b
    c = g.only_consumer(n.output[0])
    if c is not None and c.op_type == "Add":
        b = g.const_value(g.other(c, n.output[0]))
    return None if b is None else b.reshape(-1)


def _source_x(g: Graph, t: str) -> str:
    """A projection's data input, back through layout-only nodes only it reads."""
    while True:
        n = g.node(t)
        if n is None or n.op_type not in _LAYOUT or len(g.consumers[t]) != 1:
            return t
        if n.input[0] not in g.data:
            return t
        t = n.input[0]


def _scores_matmul(g: Graph, s: Any) -> Any:
    """The MatMul of two data tensors the softmax's input is (through scaling and the mask)."""
    t = s.input[0]
    for _ in range(8):
        n = g.node(t)
        if n is None:
            break
        data_in = [u for u in n.input if u in g.data]
        if n.op_type == "MatMul" and len(data_in) == 2:
            return n
        if n.op_type not in ("Add", "Div", "Mul", "Where", "Cast", "Identity") or len(data_in) != 1:
            break
        t = data_in[0]
    raise _NotIt


def _out_walk(g: Graph, t: str) -> tuple[str, tuple[np.ndarray, np.ndarray | None], str]:
    """From the heads' output (probs @ v) to the output projection and past its bias: the
    region's output, the projection's kernel and bias, the kernel's name in the file."""
    proj, bias, name = None, None, ""
    while True:
        c = g.only_consumer(t)
        if c is None:
            break
        others = [u for u in c.input if u and u != t]
        if c.op_type in _LAYOUT or c.op_type == "Expand":
            pass
        elif proj is None and _proj(g, c) is not None and c.input[0] == t:
            proj, name = _proj(g, c)[0], c.input[1]
            bias = _gemm_bias(g, c)
        elif proj is None and c.op_type in ("Mul", "Div") and all(u not in g.data for u in others):
            pass  # a mask's 0/1 or a constant scale before the projection
        elif proj is not None and bias is None and c.op_type == "Add":
            b = g.const_value(others[0]) if len(others) == 1 else None
            if b is None:
                break
            bias = b
        else:
            break
        t = c.output[0]
    if proj is None:
        raise _Refused("attention without an output projection (a MatMul by a constant)")
    return t, (proj, None if bias is None else np.asarray(bias).reshape(-1)), name


def attention(g: Graph, s_index: int, shape_of: Any) -> Region:
    """The attention region whose softmax is node ``s_index`` (module docstring)."""
    from rosetta.backends.numpy_ref.seq import attention_forward

    s = g.nodes[s_index]
    if s.input[0] not in g.data:
        raise _NotIt
    m1 = _scores_matmul(g, s)
    c = g.only_consumer(s.output[0])
    if c is None or c.op_type != "MatMul" or c.input[0] != s.output[0] or c.input[1] not in g.data:
        raise _NotIt
    if not g.ids:
        raise _Refused("attention in a model without token ids (the spec's masks id-0 keys)")
    sides = [_find_projs(g, t) for t in (m1.input[0], m1.input[1], c.input[1])]  # q, k, v
    if not all(len(p) == 1 for p in sides):
        raise _Refused("attention whose query, key or value is not one projection of the input")
    (iq,), (ik,), (iv,) = sides
    xs = {_source_x(g, _proj(g, g.nodes[i])[1]) for i in (iq, ik, iv)}
    if len(xs) != 1:
        raise _Refused("attention over two sequences (cross-attention; the spec's is self-)")
    (x,) = xs
    e = shape_of(x)[-1]
    if iq == ik == iv:  # one packed in-projection (E, 3E): q | k | v
        w, b = _proj(g, g.nodes[iq])[0], _bias_after(g, iq)
        if w.shape != (e, 3 * e):
            raise _Refused(f"a packed attention projection of shape {list(w.shape)}")
        b = np.zeros(3 * e, w.dtype) if b is None else b
        kernels = [w[:, j * e : (j + 1) * e] for j in range(3)]
        biases = [b[j * e : (j + 1) * e] for j in range(3)]
    elif len({iq, ik, iv}) == 3:
        kernels = [_proj(g, g.nodes[i])[0] for i in (iq, ik, iv)]
        biases = [_bias_after(g, i) for i in (iq, ik, iv)]
        biases = [np.zeros(e, np.float32) if b is None else b for b in biases]
    else:
        raise _Refused("attention whose projections are shared in another way than q | k | v")
    out, (wo, bo), wo_name = _out_walk(g, c.output[0])
    bo = np.zeros(e, np.float32) if bo is None else bo
    if any(k.shape != (e, e) for k in kernels) or wo.shape != (e, e):
        raise _Refused(f"attention projections not all ({e}, {e})")
    nodes = g.between(out, x)
    weights = (kernels[0], biases[0], kernels[1], kernels[2], biases[2], wo, bo)
    w64 = tuple(np.asarray(a, np.float64) for a in weights)
    heads = [h for h in range(1, e + 1) if e % h == 0]
    refs = [(h, lambda x64, valid, h=h: attention_forward(x64, valid, w64, h)[0]) for h in heads]
    batch, t = shape_of(None)
    found, err = _check(g, nodes, x, out, (batch, t, e), refs)
    if found is None:
        raise _Refused(
            f"a MatMul/Softmax region that is not the spec's attention at any head count "
            f"(error {err:.2g} of its output)"
        )
    params = dict(zip(ops.ATTENTION_ROLES, weights, strict=True))
    op = ops.Attention(name="", heads=found, mask="tokens", init={})
    names = (*(g.nodes[i].input[1] for i in (iq, ik, iv)), wo_name)
    return Region("attention", nodes, x, out, op, params, err, names)


# ----------------------------------------------------------------------------------- GELU


def gelu(g: Graph, erf_index: int, shape_of: Any) -> Region:
    """``x * 0.5 * (1 + erf(x / sqrt 2))`` in any order of its Muls: from the Erf's input's
    producer (x / sqrt 2 or x * (1 / sqrt 2)) forward through Adds and Muls."""
    from rosetta.backends.numpy_ref.seq import gelu_forward

    erf = g.nodes[erf_index]
    p = g.node(erf.input[0])
    if p is None or p.op_type not in ("Div", "Mul") or p.input[0] not in g.data:
        raise _NotIt
    x = p.input[0]
    chain, t = [], erf.output[0]
    for _ in range(3):
        c = g.only_consumer(t)
        if c is None or c.op_type not in ("Add", "Mul"):
            break
        t = c.output[0]
        chain.append(t)
    shape = (shape_of(None)[0], *shape_of(x))
    ref = [(0, lambda x64, valid: gelu_forward(x64)[0])]
    err = math.inf
    for out in reversed(chain):  # the longest chain that is the GELU
        try:
            nodes = g.between(out, x)
        except _Refused:
            continue
        found, err = _check(g, nodes, x, out, shape, ref)
        if found is not None:
            return Region("gelu", nodes, x, out, ops.GELU(form="erf"), {}, err)
    raise _Refused(f"an Erf that is not the exact GELU (error {err:.2g} of its output)")


# ---------------------------------------------------------------------------- masked mean


def masked_mean(g: Graph, r_index: int, shape_of: Any) -> Region:
    """The mean over a sequence's real tokens, as PyTorch code writes it (``(h * m).sum(1) /
    m.sum(1).clamp(min=1)``, anchored at the ReduceSum) or as a product with per-position
    weights (``valid / max(count, 1)`` (N, 1, T) @ h, then a Squeeze: Rosetta's export),
    anchored at the MatMul."""
    from rosetta.backends.numpy_ref.seq import masked_mean_forward

    r = g.nodes[r_index]
    if not g.ids:
        raise _NotIt
    if r.op_type == "MatMul":  # weights @ h
        if r.input[0] not in g.mask or r.input[1] not in g.data:
            raise _NotIt
        x, end = r.input[1], g.only_consumer(r.output[0])
        if end is None or end.op_type != "Squeeze":
            raise _NotIt
    else:  # ReduceSum(h * m) / count
        p = g.node(r.input[0])
        if p is None or p.op_type != "Mul" or r.input[0] not in g.data:
            raise _NotIt
        data = [u for u in p.input if u in g.data]
        end = g.only_consumer(r.output[0])
        if len(data) != 1 or end is None or end.op_type != "Div" or end.input[0] != r.output[0]:
            raise _NotIt
        if end.input[1] in g.data:
            raise _NotIt
        (x,) = data
    out = end.output[0]
    nodes = g.between(out, x)
    t, e = shape_of(x)
    ref = [(0, lambda x64, valid: masked_mean_forward(x64, valid)[0])]
    found, err = _check(g, nodes, x, out, (shape_of(None)[0], t, e), ref, padding_only_row=True)
    if found is None:
        raise _Refused(
            f"a masked sum that is not the spec's masked mean (a row of padding only pools to "
            f"0; error {err:.2g} of its output)"
        )
    return Region("masked_mean", nodes, x, out, ops.MaskedMean(mask="tokens"), {}, err)


#: anchor op type -> the pattern that starts there
PATTERNS = {"Softmax": attention, "Erf": gelu, "ReduceSum": masked_mean, "MatMul": masked_mean}


def find(source: Any) -> Found:
    """Every region of ``source``'s graph (a :class:`rosetta.importer.source.Source`)."""
    if not any(n.op_type in PATTERNS for n in source.model.graph.node):
        return Found()
    g = Graph.of(source)
    shapes = _shapes(source)
    batch = source.batch or 2

    found = Found()
    taken: set[int] = set()
    for i, n in enumerate(g.nodes):
        pattern = PATTERNS.get(n.op_type)
        if pattern is None or i in taken:
            continue

        def shape_of(t: str | None) -> tuple[int, ...]:
            if t is None:
                return (batch, source.input_shape[0])  # the batch and the sequence's length
            if t not in shapes:
                raise _Refused(f"the shape of {t[:40]!r} is not known (run onnx shape inference)")
            return shapes[t][1:]

        try:
            region = pattern(g, i, shape_of)
        except _NotIt:
            continue
        except _Refused as exc:
            found.refused[i] = str(exc)
            continue
        found.regions.append(region)
        taken |= region.nodes
    return found


def _shapes(source: Any) -> dict[str, tuple[int, ...]]:
    """Every tensor's static shape by ONNX's shape inference (a dynamic batch read as 1)."""
    import onnx

    try:
        model = onnx.shape_inference.infer_shapes(source.model)
    except Exception:  # noqa: BLE001 - over protobuf's 2 GiB, or a graph it cannot type
        return {}  # every region then refused: "the shape of ... is not known"
    out = {}
    for v in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        dims = v.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") or i == 0 for i, d in enumerate(dims)):
            out[v.name] = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
    return out
