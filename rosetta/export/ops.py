"""The exporter's op table, framework-free: which ONNX nodes each spec op becomes, in text.

One :class:`~rosetta.backends.driver.OpTable` (the project's one table type): each entry names
its build function in ``graph.py`` (which emits the nodes) and renders the same nodes as text
(``rosetta.backends.snippet.Snippet``), the engines' ``source.py``. Layouts: the graph computes
in the canonical NCHW / (N, T) layouts, so conv kernels (OIHW), the channel-major flatten and
dense kernels (in, out) pass unchanged; only the GRU's kernels are transposed (ONNX's ``W``, ``R``
are ``(1, 3H, in)``), its gate blocks z | r | h being ONNX's own order.

The Transformer's ops (issue 29) are composed from opset-17 nodes, written once here in text and
once in ``graph.py`` as nodes: ``LayerNormalization`` (opset 17; biased variance, ``epsilon``
inside the root: the spec's rule), exact GELU from ``Erf`` (opset 17 has no ``Gelu``), the learned
positions as one ``Add`` (of a ``Slice`` of the table where the sequence is shorter than it),
attention from ``MatMul``/``Softmax`` with the key padding mask as an additive 0 / -inf bias, and
the masked mean as one ``MatMul`` by the per-position weights. The token mask is made once from
the graph's int input (``valid = input != 0``) and shared by every op that reads it.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, OpTable, Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, add_branches, fmt_shape, statements
from rosetta.spec import ops

NAME = "onnx"

#: ops whose ONNX form needs a newer opset than :data:`rosetta.export.MIN_OPSET` (the export
#: refuses them below it, in one line naming the op and the opset)
MIN_OPSET_OF: dict[type, int] = {ops.LayerNorm: 17}  # LayerNormalization is new in opset 17


def onnx_pads(padding: tuple[int, int, int, int]) -> list[int]:
    """The spec's ``(top, bottom, left, right)`` as ONNX's ``[h_begin, w_begin, h_end, w_end]``."""
    t, b, left, right = padding
    return [t, left, b, right]


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f", {op.name}.bias" if op.bias else ""
    line = (
        f"{{x}} = Conv({{x}}, {op.name}.kernel{bias}, kernel_shape={list(op.kernel)}, "
        f"strides={list(op.stride)}, pads={onnx_pads(op.padding)})  # {fmt_shape(site.out_shape)}"
    )
    w = [Weight(f"{op.name}.kernel", f"{op.name}.kernel", note="OIHW, as stored")]
    if op.bias:
        w.append(Weight(f"{op.name}.bias", f"{op.name}.bias"))
    return Snippet(forward=(line,), weights=tuple(w))


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = MaxPool({{x}}, kernel_shape={list(op.kernel)}, strides={list(op.stride)}, "
        f"pads={onnx_pads(op.padding)})  # padded cells never win"
    )
    return Snippet(forward=(line,))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = Relu({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(notes=(f"dropout {op.rate}: the identity at evaluation, no node",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = Flatten({{x}}, axis=1)  # {fmt_shape(site.out_shape)}, CHW",))


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f", {op.name}.bias" if op.bias else ""
    w = [Weight(f"{op.name}.kernel", f"{op.name}.kernel", note="IO, as stored (transB=0)")]
    if op.bias:
        w.append(Weight(f"{op.name}.bias", f"{op.name}.bias"))
    if len(site.in_shape) == 2:  # (N, T, E): Gemm is 2-D only, so MatMul (batched) then Add
        line = f"{{x}} = MatMul({{x}}, {op.name}.kernel)  # {fmt_shape(site.out_shape)}"
        add = (f"{{x}} = Add({{x}}, {op.name}.bias)",) if op.bias else ()
        return Snippet(forward=(line, *add), weights=tuple(w))
    line = f"{{x}} = Gemm({{x}}, {op.name}.kernel{bias})  # {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,), weights=tuple(w))


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    stats = f"{n}.gamma, {n}.beta, {n}.mean, {n}.var"
    line = f"{{x}} = BatchNormalization({{x}}, {stats}, epsilon={op.eps})"
    parts = ("gamma", "beta", "mean", "var")
    return Snippet(forward=(line,), weights=tuple(Weight(f"{n}.{p}", f"{n}.{p}") for p in parts))


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(
        forward=(
            f"{{x}} = Flatten(GlobalAveragePool({{x}}), axis=1)  # {fmt_shape(site.out_shape)}",
        )
    )


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    line = f"{{x}} = Gather({op.name}.table, {{x}})  # ids -> {fmt_shape(site.out_shape)}"
    return Snippet(forward=(line,), weights=(Weight(f"{op.name}.table", f"{op.name}.table"),))


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    lines = (
        "{x} = Transpose({x}, perm=[1, 0, 2])  # (N, T, E) -> (T, N, E), ONNX's sequence layout",
        f"_, {{x}} = GRU({{x}}, W={n}.W, R={n}.R, B={n}.B, hidden_size={op.units}, "
        "linear_before_reset=1)  # z|r|h, the reset gate after the recurrent matmul",
        f"{{x}} = Squeeze({{x}}, axes=[0])  # Y_h (1, N, H) -> {fmt_shape(site.out_shape)}",
    )
    w = (
        Weight(f"{n}.kernel", f"{n}.W", "a.T[None]", "a[0].T", note="(E, 3H) -> (1, 3H, E)"),
        Weight(
            f"{n}.recurrent_kernel", f"{n}.R", "a.T[None]", "a[0].T", note="(H, 3H) -> (1, 3H, H)"
        ),
        Weight(f"{n}.bias_input", f"{n}.B", "a", "a", native_part="np.s_[0, :3 * H]"),
        Weight(f"{n}.bias_recurrent", f"{n}.B", "a", "a", native_part="np.s_[0, 3 * H:]"),
    )
    return Snippet(
        forward=lines,
        weights=w,
        notes=("GRU: gate order z | r | h is ONNX's own; reset_after is linear_before_reset=1",),
    )


def _mask_lines(ctx: RenderCtx, *pieces: str) -> tuple[str, ...]:
    """The lines making the token mask's ``pieces`` not written yet (each once per graph, as
    ``graph.py`` emits them): ``valid``, ``count``, ``key_bias``, ``any_key``."""
    lines = {
        "valid": "valid = Not(Equal(input, 0))  # (N, T) bool: the real tokens (id 0 is padding)",
        "count": "count = ReduceSum(Cast(valid, float), axes=[1], keepdims=1)  # (N, 1)",
        "key_bias": "key_bias = Unsqueeze(Where(Or(valid, Not(Greater(count, 0))), 0, -inf), "
        "[1, 2])  # (N, 1, 1, T); a row of padding only keeps every key (zeroed below)",
        "any_key": "any_key = Unsqueeze(Cast(Greater(count, 0), float), [2])  # (N, 1, 1)",
    }
    need = {"valid": (), "count": ("valid",), "key_bias": ("count",), "any_key": ("count",)}
    done = ctx.extra.setdefault("onnx_mask", set())
    out: list[str] = []

    def add(piece: str) -> None:
        for before in need[piece]:
            add(before)
        if piece not in done:
            done.add(piece)
            out.append(lines[piece])

    for piece in pieces:
        add(piece)
    return tuple(out)


def layer_norm(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = op.name
    line = (
        f"{{x}} = LayerNormalization({{x}}, {n}.gamma, {n}.beta, axis=-1, epsilon={op.eps})"
        "  # biased variance, eps inside the root (opset 17)"
    )
    return Snippet(
        forward=(line,),
        weights=(Weight(f"{n}.gamma", f"{n}.gamma"), Weight(f"{n}.beta", f"{n}.beta")),
    )


def gelu(op: ops.GELU, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        "{x} = Mul(Mul({x}, 0.5), Add(Erf(Div({x}, sqrt(2))), 1))"
        "  # exact GELU from Erf: opset 17 has no Gelu"
    )
    return Snippet(forward=(line,))


def position_embedding(op: ops.PositionEmbedding, site: Site, ctx: RenderCtx) -> Snippet:
    t = site.in_shape[0]
    table = f"{op.name}.table"
    if t < op.max_len:
        table = f"Slice({table}, starts=[0], ends=[{t}], axes=[0])"
    line = f"{{x}} = Add({{x}}, {table})  # positions 0..{t - 1}, one row each"
    return Snippet(forward=(line,), weights=(Weight(f"{op.name}.table", f"{op.name}.table"),))


def attention(op: ops.Attention, site: Site, ctx: RenderCtx) -> Snippet:
    n, (t, e), h = op.name, site.in_shape, op.heads
    d = e // h
    split = f"[0, 0, {h}, {d}]"
    lines = (
        *_mask_lines(ctx, "key_bias", "any_key"),
        f"q = Transpose(Reshape(Add(MatMul({{x}}, {n}.query_kernel), {n}.query_bias), {split}), "
        f"perm=[0, 2, 1, 3])  # (N, {h}, {t}, {d})",
        f"k = Transpose(Reshape(MatMul({{x}}, {n}.key_kernel), {split}), perm=[0, 2, 3, 1])"
        f"  # (N, {h}, {d}, {t}): no key bias",
        f"v = Transpose(Reshape(Add(MatMul({{x}}, {n}.value_kernel), {n}.value_bias), {split}), "
        f"perm=[0, 2, 1, 3])",
        f"p = Softmax(Add(Div(MatMul(q, k), sqrt({d})), key_bias), axis=-1)"
        "  # a masked key: weight exactly 0",
        f"{{x}} = Mul(Reshape(Transpose(MatMul(p, v), perm=[0, 2, 1, 3]), [0, 0, {e}]), any_key)"
        "  # heads concatenated; a row of padding only: 0",
        f"{{x}} = Add(MatMul({{x}}, {n}.output_kernel), {n}.output_bias)"
        f"  # {fmt_shape(site.out_shape)}",
    )
    w = tuple(Weight(f"{n}.{r}", f"{n}.{r}") for r in ops.ATTENTION_ROLES)
    return Snippet(forward=lines, weights=w)


def masked_mean(op: ops.MaskedMean, site: Site, ctx: RenderCtx) -> Snippet:
    lines = (
        *_mask_lines(ctx, "count"),
        "weight = Unsqueeze(Div(Cast(valid, float), Max(count, 1)), [1])  # (N, 1, T)",
        f"{{x}} = Squeeze(MatMul(weight, {{x}}), [1])  # {fmt_shape(site.out_shape)}; "
        "padding only: 0, never 0/0",
    )
    return Snippet(forward=lines)


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Nodes in order, each reading the previous one's output."""
    return statements(parts)


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The body on the input, the shortcut on the kept input, joined by one ``Add`` node."""
    return add_branches(body, shortcut, site, "{x} = Add({x}, {s})  # " + fmt_shape(site.out_shape))


#: the exporter's one op table; ``graph.TABLE`` (nodes) and ``RENDER`` (text) are its two faces
OPS = OpTable(
    backend=NAME,
    entries={
        ops.Conv2D: Entry("conv2d", conv2d),
        ops.MaxPool2D: Entry("maxpool2d", maxpool2d),
        ops.ReLU: Entry("relu", relu),
        ops.Dropout: Entry("dropout", dropout),
        ops.Flatten: Entry("flatten", flatten),
        ops.Dense: Entry("dense", dense),
        ops.BatchNorm: Entry("batchnorm", batchnorm),
        ops.GlobalAvgPool: Entry("global_avgpool", global_avgpool),
        ops.Embedding: Entry("embedding", embedding),
        ops.GRU: Entry("gru", gru),
        ops.LayerNorm: Entry("layer_norm", layer_norm),
        ops.GELU: Entry("gelu", gelu),
        ops.PositionEmbedding: Entry("position_embedding", position_embedding),
        ops.Attention: Entry("attention", attention),
        ops.MaskedMean: Entry("masked_mean", masked_mean),
    },
    sequence=Entry("sequence", sequence),
    residual=Entry("residual", residual),
)
RENDER = OPS.rendering()
