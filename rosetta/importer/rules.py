"""One small function per ONNX node type: what it becomes in the spec (ONNX's reference
evaluator's layout: one function per op, one table).

A rule reads its node's inputs from the :class:`~rosetta.importer.translate.Ctx`, checks every
attribute the spec op does not express (a grouped or dilated convolution, ``ceil_mode``, a
``Gemm`` with ``alpha`` != 1...) and raises :class:`~rosetta.importer.translate.Unsupported` naming
it, then emits the spec op with its weights in the canonical layouts (``rosetta.spec.ops``):
ONNX's ``Conv`` kernel is OIHW like the spec's; ``Gemm``'s ``B`` is the spec's IO kernel,
transposed when ``transB`` (PyTorch's ``Linear``); ONNX pads are ``(top, left, bottom, right)``
and the spec's ``(top, bottom, left, right)``; ONNX's BatchNormalization ``momentum`` is the
running average's keep rate (Keras' convention), the spec's PyTorch's ``1 - momentum``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rosetta.importer.translate import Ctx, Unsupported, Value, layer_name
from rosetta.spec import ops
from rosetta.spec.init import make_init

_FILE = make_init("file")


def attrs(node: Any) -> dict[str, Any]:
    """The node's attributes as Python values."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _image(v: Value, what: str) -> None:
    if len(v.shape) != 3 or v.ones:
        raise Unsupported(
            f"{what} of a rank-{len(v.shape) + 1} tensor (the spec's is (N, C, H, W))"
        )


def _pads(a: dict, what: str) -> tuple[int, int, int, int]:
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise Unsupported(f"{what} auto_pad={a['auto_pad']!r} (export with explicit pads)")
    top, left, bottom, right = a.get("pads", [0, 0, 0, 0])
    return (int(top), int(bottom), int(left), int(right))  # ONNX: begins, then ends


def _unit(a: dict, key: str, what: str) -> None:
    if any(d != 1 for d in a.get(key, [1, 1])):
        raise Unsupported(f"{what} with {key}={list(a[key])} (the spec's is 1)")


def conv(ctx: Ctx, node: Any) -> None:
    a = attrs(node)
    x = ctx.value(node.input[0])
    _image(x, "Conv")
    _unit(a, "dilations", "Conv")
    w = ctx.const(node.input[1])
    b = ctx.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    name = layer_name(ctx, node, node.input[1], "conv")
    op = ops.Conv2D(
        name=name,
        out_channels=int(w.shape[0]),
        kernel=(int(w.shape[2]), int(w.shape[3])),
        stride=tuple(int(s) for s in a.get("strides", [1, 1])),
        padding=_pads(a, "Conv"),
        bias=b is not None,
        init={"kernel": _FILE, **({"bias": _FILE} if b is not None else {})},
        groups=int(a.get("group", 1)),  # depthwise where it equals the channels
    )
    params = {"kernel": w, **({"bias": b} if b is not None else {})}  # OIHW as the spec's
    ctx.emit(op, node.output[0], [x], params)


def maxpool(ctx: Ctx, node: Any) -> None:
    a = attrs(node)
    x = ctx.value(node.input[0])
    _image(x, "MaxPool")
    if a.get("ceil_mode", 0):
        raise Unsupported("MaxPool with ceil_mode=1 (the spec floors the output size)")
    if len(node.output) > 1 and node.output[1]:
        raise Unsupported("MaxPool's Indices output (the spec's max-pool gives values only)")
    _unit(a, "dilations", "MaxPool")
    op = ops.MaxPool2D(
        kernel=tuple(int(k) for k in a["kernel_shape"]),
        stride=tuple(int(s) for s in a.get("strides", [1, 1])),
        padding=_pads(a, "MaxPool"),
    )
    ctx.emit(op, node.output[0], [x])


def avgpool(ctx: Ctx, node: Any) -> None:
    """ONNX ``AveragePool`` -> ``avgpool2d``, its ``count_include_pad`` (default 0: real cells
    only) kept as the spec's flag."""
    a = attrs(node)
    x = ctx.value(node.input[0])
    _image(x, "AveragePool")
    if a.get("ceil_mode", 0):
        raise Unsupported("AveragePool with ceil_mode=1 (the spec floors the output size)")
    _unit(a, "dilations", "AveragePool")
    kernel = tuple(int(k) for k in a["kernel_shape"])
    padding = _pads(a, "AveragePool")
    if max(padding[:2]) >= kernel[0] or max(padding[2:]) >= kernel[1]:
        raise Unsupported(f"AveragePool with pads {list(a['pads'])} not smaller than the kernel")
    op = ops.AvgPool2D(
        kernel=kernel,
        stride=tuple(int(s) for s in a.get("strides", [1, 1])),
        padding=padding,
        count_include_pad=bool(a.get("count_include_pad", 0)),
    )
    ctx.emit(op, node.output[0], [x])


def _elementwise(op: object) -> Callable[[Ctx, Any], None]:
    def rule(ctx: Ctx, node: Any) -> None:
        ctx.emit(op, node.output[0], [_flat(ctx.value(node.input[0]))])

    return rule


def softmax(ctx: Ctx, node: Any) -> None:
    """``Softmax`` over the last axis (opset 13's one axis; the importer reads 13 and later, whose
    default is -1): the spec's softmax. Any other axis is refused, as is a last axis that is a
    unit axis ONNX keeps and the spec does not (a softmax of one element, always 1)."""
    x = ctx.value(node.input[0])
    rank = len(x.shape) + x.ones + 1  # the batch axis leads
    axis = int(attrs(node).get("axis", -1))
    if axis not in (-1, rank - 1):
        raise Unsupported(
            f"Softmax over axis {axis} of a rank-{rank} tensor (the spec's is over the last axis)"
        )
    if x.ones:
        raise Unsupported("Softmax over a unit axis the spec does not keep")
    ctx.emit(ops.Softmax(), node.output[0], [x])


def _flat(v: Value) -> Value:
    """A value as the spec sees it (the unit axes ONNX keeps are not the spec's)."""
    return Value(v.layer, v.shape)


def gelu(ctx: Ctx, node: Any) -> None:
    if attrs(node).get("approximate", b"none") not in (b"none", "none"):
        raise Unsupported("GELU's tanh approximation (the spec's is exact: erf)")
    ctx.emit(ops.GELU(form="erf"), node.output[0], [_flat(ctx.value(node.input[0]))])


def global_avgpool(ctx: Ctx, node: Any) -> None:
    x = ctx.value(node.input[0])
    _image(x, "GlobalAveragePool")
    v = ctx.emit(ops.GlobalAvgPool(), node.output[0], [x])
    ctx.values[node.output[0]] = Value(v.layer, v.shape, ones=2)  # ONNX keeps (C, 1, 1)


def _axes(ctx: Ctx, node: Any, rank: int) -> set[int] | None:
    """A reduction's or squeeze's ``axes`` (an attribute before opset 13/18, an input after),
    made non-negative; None where the node names none."""
    a = attrs(node)
    if "axes" in a:
        raw = list(a["axes"])
    elif len(node.input) > 1 and node.input[1]:
        raw = [int(v) for v in ctx.const(node.input[1]).reshape(-1)]
    else:
        return None
    return {d + rank if d < 0 else d for d in raw}


def reduce_mean(ctx: Ctx, node: Any) -> None:
    """The mean over an image's height and width: a global average pooling (``x.mean((2, 3))``)."""
    x = ctx.value(node.input[0])
    _image(x, "ReduceMean")
    if _axes(ctx, node, 4) != {2, 3}:
        raise Unsupported("ReduceMean over axes other than an image's height and width")
    v = ctx.emit(ops.GlobalAvgPool(), node.output[0], [x])
    if attrs(node).get("keepdims", 1):
        ctx.values[node.output[0]] = Value(v.layer, v.shape, ones=2)  # ONNX keeps (C, 1, 1)


def squeeze(ctx: Ctx, node: Any) -> None:
    """Dropping the unit axes ONNX keeps and the spec does not (after a pooling; a recurrent
    layer's direction axis): absorbed."""
    if ctx.fold(node, lambda a, *axes: np.squeeze(a, tuple(int(d) for d in axes[0]))
                if axes else np.squeeze(a)):  # fmt: skip
        return
    x = ctx.value(node.input[0], ("", "state"))
    if x.frame == "state":
        if _axes(ctx, node, 3) != {0}:
            raise Unsupported("Squeeze of a recurrent state's axes other than its direction")
        ctx.alias(node.output[0], Value(x.layer, x.shape), "the one direction's state")
        return
    rank = 1 + len(x.shape) + x.ones
    axes = _axes(ctx, node, rank)
    trailing = set(range(1 + len(x.shape), rank))
    if axes is None or not axes or not axes <= trailing:
        raise Unsupported("Squeeze of axes other than the unit axes left by a pooling")
    ctx.alias(node.output[0], Value(x.layer, x.shape, x.ones - len(axes)), "unit axes dropped")


def flatten(ctx: Ctx, node: Any) -> None:
    axis = attrs(node).get("axis", 1)
    x = ctx.value(node.input[0])
    if axis != 1:
        raise Unsupported(f"Flatten with axis={axis} (the spec flattens each sample: axis 1)")
    _to_flat(ctx, node, x)


def _to_flat(ctx: Ctx, node: Any, x: Value) -> None:
    if len(x.shape) == 1:
        ctx.alias(node.output[0], _flat(x), "a flat tensor stays flat")
    else:
        ctx.emit(ops.Flatten(order="CHW"), node.output[0], [x])


def reshape(ctx: Ctx, node: Any) -> None:
    x = ctx.value(node.input[0])
    target = [int(d) for d in ctx.const(node.input[1]).reshape(-1)]
    size = int(np.prod(x.shape))
    flat = len(target) == 2 and target[1] in (-1, size) and target[0] in (-1, 0, 1)
    same = target[1:] == list(x.shape) + [1] * x.ones and target[0] in (-1, 0, 1)
    if same:
        ctx.alias(node.output[0], x, "a reshape to the same shape")
    elif flat:
        _to_flat(ctx, node, x)
    else:
        raise Unsupported(
            f"Reshape of {list(x.shape)} to {target[1:]} per sample (only flattening is read)"
        )


def gemm(ctx: Ctx, node: Any) -> None:
    a = attrs(node)
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
        raise Unsupported("Gemm with transA, alpha or beta (the spec's dense is x W + b)")
    x = _flat(ctx.value(node.input[0]))
    if len(x.shape) != 1:
        raise Unsupported(f"Gemm of a rank-{len(x.shape) + 1} tensor")
    w = ctx.const(node.input[1])
    kernel = w.T if a.get("transB", 0) else w  # Linear's (out, in) -> the spec's IO
    b = ctx.const(node.input[2]).reshape(-1) if len(node.input) > 2 and node.input[2] else None
    _dense(ctx, node, x, kernel, b)


def _dense(ctx: Ctx, node: Any, x: Value, kernel: np.ndarray, bias: np.ndarray | None) -> None:
    name = layer_name(ctx, node, node.input[1], "dense")
    op = ops.Dense(
        name=name,
        units=int(kernel.shape[1]),
        bias=bias is not None,
        init={"kernel": _FILE, **({"bias": _FILE} if bias is not None else {})},
    )
    params = {"kernel": kernel, **({"bias": bias} if bias is not None else {})}
    ctx.emit(op, node.output[0], [x], params)


def matmul(ctx: Ctx, node: Any) -> None:
    x = _flat(ctx.value(node.input[0]))
    w = ctx.const(node.input[1])
    if w.ndim != 2:
        raise Unsupported("MatMul with a weight of rank other than 2")
    _dense(ctx, node, x, w, None)


def add(ctx: Ctx, node: Any) -> None:
    a, b = node.input
    if a in ctx.values and b in ctx.values:
        xs = [_flat(ctx.values[a]), _flat(ctx.values[b])]
        if xs[0].shape != xs[1].shape:
            raise Unsupported(f"Add with broadcasting ({list(xs[0].shape)} + {list(xs[1].shape)})")
        ctx.emit(ops.Add(), node.output[0], xs)
        return
    data, const = (a, b) if a in ctx.values else (b, a)
    x, c = ctx.value(data), ctx.const(const)
    if len(x.shape) == 2 and c.shape in ((1, *x.shape), x.shape):
        _positions(ctx, node, x, c.reshape(x.shape), const)
        return
    _bias(ctx, node, x, c.reshape(-1), data)


def _positions(ctx: Ctx, node: Any, x: Value, table: np.ndarray, tensor: str) -> None:
    """A sequence plus a constant of its own (T, E) shape: learned absolute positions (a
    ``nn.Parameter`` added to the embeddings), the spec's position_embedding of ``max_len`` T."""
    name = layer_name(ctx, node, tensor, "position")
    op = ops.PositionEmbedding(name=name, max_len=int(x.shape[0]), init={"table": _FILE})
    ctx.emit(op, node.output[0], [x], {"table": table})


def _bias(ctx: Ctx, node: Any, x: Value, bias: np.ndarray, tensor: str) -> None:
    """``MatMul`` then ``Add`` of a constant: the bias of the dense layer before it, if that
    layer has none and nothing else reads its output."""
    item = ctx.layers[x.layer] if x.layer >= 0 else {}
    if item.get("op") != "dense" or item["bias"] or ctx.consumers[tensor] != 1:
        raise Unsupported("Add of a constant that is not a dense layer's bias")
    if bias.shape != (item["units"],):
        raise Unsupported(f"Add of a constant of shape {list(bias.shape)} (a bias is (units,))")
    item["bias"] = True
    ctx.weights[f"{item['name']}.bias"] = np.ascontiguousarray(bias, dtype=np.float32)
    ctx.values[node.output[0]] = x
    ctx.became.add("dense (its bias)")


def sum_(ctx: Ctx, node: Any) -> None:
    xs = [_flat(ctx.value(n)) for n in node.input]
    if len(xs) == 1:
        ctx.alias(node.output[0], xs[0], "a sum of one")
    else:
        ctx.emit(ops.Add(), node.output[0], xs)


def concat(ctx: Ctx, node: Any) -> None:
    if ctx.fold(node, lambda *a: np.concatenate(a, axis=attrs(node)["axis"])):
        return
    xs = [ctx.value(n) for n in node.input]
    rank = len(xs[0].shape) + xs[0].ones + 1
    axis = attrs(node)["axis"]
    axis = axis + rank if axis < 0 else axis
    if axis == 0:
        raise Unsupported("Concat along the batch axis")
    if axis - 1 >= len(xs[0].shape):
        raise Unsupported("Concat along a unit axis the spec does not keep")
    ctx.emit(ops.Concat(axis=axis - 1), node.output[0], [_flat(x) for x in xs])


def batchnorm(ctx: Ctx, node: Any) -> None:
    a = attrs(node)
    if a.get("training_mode", 0):
        raise Unsupported("BatchNormalization in training mode (the spec's is inference)")
    x = ctx.value(node.input[0])
    _image(x, "BatchNormalization")
    scale, bias, mean, var = (ctx.const(n) for n in node.input[1:5])
    name = layer_name(ctx, node, node.input[1], "bn")
    momentum = _f32(1.0 - _f32(a.get("momentum", 0.9)))  # ONNX keeps, the spec updates
    op = ops.BatchNorm(
        name=name,
        eps=_f32(a.get("epsilon", 1e-5)),
        momentum=momentum,
        init={k: _FILE for k in ("gamma", "beta", "mean", "var")},
    )
    params = {"gamma": scale, "beta": bias, "mean": mean, "var": var}
    ctx.emit(op, node.output[0], [x], params)


def layer_norm(ctx: Ctx, node: Any) -> None:
    """``LayerNormalization`` (opset 17) over the last axis, scale and bias constants: the
    spec's layer_norm (biased variance, ``epsilon`` inside the root: ONNX's definition)."""
    a = attrs(node)
    x = _flat(ctx.value(node.input[0]))
    if int(a.get("axis", -1)) not in (-1, len(x.shape)):
        raise Unsupported(f"LayerNormalization over axis {a['axis']} (the spec's: the last)")
    if len(node.output) > 1 and any(ctx.consumers[o] for o in node.output[1:] if o):
        raise Unsupported("LayerNormalization's mean or inverse deviation output read")
    e = x.shape[-1]
    gamma = ctx.const(node.input[1]).reshape(-1)
    has_b = len(node.input) > 2 and node.input[2]
    beta = ctx.const(node.input[2]).reshape(-1) if has_b else np.zeros(e, np.float32)
    if gamma.shape != (e,) or beta.shape != (e,):
        raise Unsupported(f"LayerNormalization with a scale or bias not of shape ({e},)")
    name = layer_name(ctx, node, node.input[1], "layer_norm")
    op = ops.LayerNorm(name=name, eps=_f32(a.get("epsilon", 1e-5)),
                       init={"gamma": _FILE, "beta": _FILE})  # fmt: skip
    ctx.emit(op, node.output[0], [x], {"gamma": gamma, "beta": beta})


def _f32(value: float) -> float:
    """An ONNX float attribute (stored as float32) as the decimal it was written as: 1e-05, not
    9.999999747378752e-06 (7 significant digits round-trip every float32)."""
    return float(f"{float(value):.7g}")


def clip(ctx: Ctx, node: Any) -> None:
    x = _flat(ctx.value(node.input[0]))
    a = attrs(node)
    bounds = []
    for k, key, default in ((1, "min", -np.inf), (2, "max", np.inf)):
        if len(node.input) > k and node.input[k]:  # opset 11+: the bounds are inputs
            bounds.append(float(ctx.const(node.input[k]).reshape(())))
        else:
            bounds.append(float(a.get(key, default)))
    if not all(np.isfinite(bounds)):
        raise Unsupported("Clip with one bound only (the spec's clip has both)")
    ctx.emit(ops.Clip(min=bounds[0], max=bounds[1]), node.output[0], [x])


def mul(ctx: Ctx, node: Any) -> None:
    a, b = node.input
    if a not in ctx.values or b not in ctx.values:
        raise Unsupported("Mul by a constant (a scale the spec does not express yet)")
    xs = [_flat(ctx.values[a]), _flat(ctx.values[b])]
    if xs[0].shape != xs[1].shape:
        raise Unsupported(f"Mul with broadcasting ({list(xs[0].shape)} * {list(xs[1].shape)})")
    ctx.emit(ops.Mul(), node.output[0], xs)


def shape(ctx: Ctx, node: Any) -> None:
    """The ONNX shape of a value, as a constant (the batch: the file's, else 1), for the shape
    arithmetic that sizes a zero state; folded."""
    x = ctx.value(node.input[0], ("", "ids", "time", "state"))
    if x.frame == "time":
        dims = [x.shape[0], ctx.batch, *x.shape[1:]]
    elif x.frame == "state":
        dims = [1, ctx.batch, *x.shape]
    else:
        dims = [ctx.batch, *x.shape, *([1] * x.ones)]
    a = attrs(node)
    ctx.constants[node.output[0]] = np.array(dims, np.int64)[a.get("start", 0) : a.get("end")]
    ctx.became.add("folded (constant arithmetic)")


def unsqueeze(ctx: Ctx, node: Any) -> None:
    if not ctx.fold(node, lambda a, axes=None: np.expand_dims(a, tuple(int(d) for d in axes))):
        raise Unsupported("Unsqueeze of data (only of constants: shape arithmetic)")


def expand(ctx: Ctx, node: Any) -> None:
    def broadcast(a: np.ndarray, shape_: np.ndarray) -> np.ndarray:
        return np.broadcast_to(a, np.broadcast_shapes(a.shape, tuple(int(d) for d in shape_)))

    if not ctx.fold(node, broadcast):
        raise Unsupported("Expand of data (only of constants: a zero state's shape)")


def gather(ctx: Ctx, node: Any) -> None:
    """An embedding (the rows of a constant table at the token ids), a recurrent state's one
    direction (index 0 or -1 of its first axis), or constant arithmetic (folded)."""
    axis = attrs(node).get("axis", 0)
    if ctx.fold(node, lambda a, i: np.take(a, i, axis=axis)):
        return
    data, indices = node.input[0], node.input[1]
    if data in ctx.constants:
        ids = ctx.value(indices, ("ids",))
        table = ctx.const(data)
        if table.ndim != 2 or axis != 0:
            raise Unsupported("Gather of token ids from a table that is not (vocab, dim) rows")
        name = layer_name(ctx, node, data, "embedding")
        op = ops.Embedding(name=name, vocab=int(table.shape[0]), dim=int(table.shape[1]),
                           init={"table": _FILE})  # fmt: skip
        ctx.emit(op, node.output[0], [ids], {"table": table})
        return
    x = ctx.value(data, ("state",))
    index = ctx.const(indices)
    if axis != 0 or index.shape != () or int(index) not in (0, -1):
        raise Unsupported("Gather from a recurrent state other than its one direction")
    ctx.alias(node.output[0], Value(x.layer, x.shape), "the one direction's state")


def transpose(ctx: Ctx, node: Any) -> None:
    """A sequence's batch and time axes swapped (``perm [1, 0, 2]``: what an RNN reads): the
    spec's sequences are (T, E) per sample whichever way a backend runs them; absorbed."""
    x = ctx.value(node.input[0], ("", "time"))
    if list(attrs(node).get("perm", [])) != [1, 0, 2] or len(x.shape) != 2 or x.ones:
        raise Unsupported("Transpose other than a sequence's batch/time swap (perm [1, 0, 2])")
    frame = "time" if x.frame == "" else ""
    ctx.alias(node.output[0], Value(x.layer, x.shape, frame=frame), "a sequence's (T, N) swap")


def _recurrent(ctx: Ctx, node: Any, a: dict, what: str) -> Value:
    """What the spec's recurrent ops share, checked: one forward direction, time-major
    (``layout=0``), the default activations, every step run (no ``sequence_lens``), zero
    initial states, and only the final state ``Y_h`` read. Returns the input sequence."""
    x = ctx.value(node.input[0], ("time",))
    direction = a.get("direction", b"forward")
    if direction not in (b"forward", "forward"):
        raise Unsupported(f"{what} direction {direction!r} (the spec's runs forward only)")
    for key in ("activations", "clip", "activation_alpha", "activation_beta", "input_forget"):
        if a.get(key):
            raise Unsupported(f"{what} with {key} (the spec's is sigmoid/tanh, unclipped)")
    if a.get("layout", 0) != 0:
        raise Unsupported(f"{what} with layout=1 (export time-major, as PyTorch does)")
    extra = list(node.input[4:]) + [""] * 4
    if extra[0]:
        raise Unsupported(f"{what} with sequence_lens (the spec runs every step)")
    if any(name and np.any(ctx.const(name)) for name in extra[1:3]):
        raise Unsupported(f"{what} with a nonzero initial state (the spec's starts at zeros)")
    if extra[3]:
        raise Unsupported(f"{what} with peepholes (the spec's has none)")
    if node.output[0] and ctx.consumers[node.output[0]]:
        raise Unsupported(f"{what}'s full output sequence Y read (the spec's returns the last)")
    if len(node.output) > 2 and node.output[2] and ctx.consumers[node.output[2]]:
        raise Unsupported(f"{what}'s final cell Y_c read (the spec's returns the state)")
    return x


def gru(ctx: Ctx, node: Any) -> None:
    """ONNX's ``GRU`` (one direction, ``linear_before_reset=1``, zero initial state): the spec's
    gru, whose z | r | h gate blocks are ONNX's; its final state ``Y_h`` is what the spec's
    ``output: last`` returns (the full sequence ``Y`` must be unread)."""
    a = attrs(node)
    x = _recurrent(ctx, node, a, "GRU")
    if a.get("linear_before_reset", 0) != 1:
        raise Unsupported(
            "GRU with linear_before_reset=0 (the spec's applies the reset gate after the "
            "recurrent matmul: PyTorch's, cuDNN's, Keras' reset_after)"
        )
    w, r = ctx.const(node.input[1]), ctx.const(node.input[2])  # (1, 3H, E), (1, 3H, H)
    h = int(a["hidden_size"])
    has_b = len(node.input) > 3 and node.input[3]
    b = ctx.const(node.input[3]) if has_b else np.zeros((1, 6 * h), w.dtype)
    name = layer_name(ctx, node, node.input[1], "gru")  # ours: gru.W; torch.onnx: the node
    inits = ("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")
    op = ops.GRU(name=name, units=h, gate_order=("z", "r", "h"), reset_after=True,
                 initial_state="zeros", output="last", init={k: _FILE for k in inits})  # fmt: skip
    params = {"kernel": w[0].T, "recurrent_kernel": r[0].T,  # (E, 3H), (H, 3H)
              "bias_input": b[0, : 3 * h], "bias_recurrent": b[0, 3 * h :]}  # fmt: skip
    value = ctx.emit(op, node.output[1], [Value(x.layer, x.shape)], params)
    ctx.values[node.output[1]] = Value(value.layer, value.shape, frame="state")


def lstm(ctx: Ctx, node: Any) -> None:
    """ONNX's ``LSTM`` (one direction, zero state and cell, no peepholes): the spec's lstm. ONNX
    orders the gate blocks i | o | f | c, the spec i | f | g | o (moved back here); its two biases
    only ever act as their sum, the spec's one bias (``rosetta.spec.ops.LSTM``)."""
    from rosetta.export.weights import IFGO, to_iofc

    a = attrs(node)
    x = _recurrent(ctx, node, a, "LSTM")
    w, r = ctx.const(node.input[1]), ctx.const(node.input[2])  # (1, 4H, E), (1, 4H, H)
    h = int(a["hidden_size"])
    has_b = len(node.input) > 3 and node.input[3]
    b = ctx.const(node.input[3]) if has_b else np.zeros((1, 8 * h), w.dtype)
    name = layer_name(ctx, node, node.input[1], "lstm")  # ours: lstm.W; torch.onnx: the node
    inits = ("kernel", "recurrent_kernel", "bias")
    op = ops.LSTM(name=name, units=h, gate_order=("i", "f", "g", "o"), initial_state="zeros",
                  output="last", init={k: _FILE for k in inits})  # fmt: skip
    params = {
        "kernel": to_iofc(w[0].T, IFGO),  # (4H, E) i|o|f|c -> (E, 4H) i|f|g|o
        "recurrent_kernel": to_iofc(r[0].T, IFGO),  # (4H, H) -> (H, 4H)
        "bias": to_iofc(b[0, : 4 * h] + b[0, 4 * h :], IFGO),  # Wb + Rb: the one bias
    }
    value = ctx.emit(op, node.output[1], [Value(x.layer, x.shape)], params)
    ctx.values[node.output[1]] = Value(value.layer, value.shape, frame="state")


def identity(ctx: Ctx, node: Any) -> None:
    if ctx.fold(node, lambda a: a):  # a weight torch.onnx shares under a second name
        return
    ctx.alias(node.output[0], ctx.value(node.input[0]), "the identity")


def dropout(ctx: Ctx, node: Any) -> None:
    if len(node.output) > 1 and node.output[1]:
        raise Unsupported("Dropout's mask output")
    ctx.alias(node.output[0], ctx.value(node.input[0]), "dropout: the identity at inference")


def constant(ctx: Ctx, node: Any) -> None:
    from onnx import numpy_helper

    a = attrs(node)
    if "value" not in a:
        raise Unsupported("a Constant other than a tensor value")
    ctx.constants[node.output[0]] = numpy_helper.to_array(a["value"])
    ctx.became.add("absorbed (a constant its reader takes)")


#: ONNX op type -> its rule
RULES: dict[str, Callable[[Ctx, Any], None]] = {
    "Conv": conv,
    "MaxPool": maxpool,
    "AveragePool": avgpool,
    "Relu": _elementwise(ops.ReLU()),
    "Sigmoid": _elementwise(ops.Sigmoid()),
    "Tanh": _elementwise(ops.Tanh()),
    "HardSwish": _elementwise(ops.HardSwish()),
    "Softmax": softmax,
    "Clip": clip,
    "Mul": mul,
    "Gelu": gelu,
    "GlobalAveragePool": global_avgpool,
    "ReduceMean": reduce_mean,
    "Squeeze": squeeze,
    "Flatten": flatten,
    "Reshape": reshape,
    "Gemm": gemm,
    "MatMul": matmul,
    "Add": add,
    "Sum": sum_,
    "Concat": concat,
    "BatchNormalization": batchnorm,
    "LayerNormalization": layer_norm,
    "Identity": identity,
    "Dropout": dropout,
    "Constant": constant,
    "Shape": shape,
    "Unsqueeze": unsqueeze,
    "Expand": expand,
    "Gather": gather,
    "Transpose": transpose,
    "GRU": gru,
    "LSTM": lstm,
}
