"""The exporter's op table, framework-free: which ONNX nodes each spec op becomes, in text.

One :class:`~rosetta.backends.driver.OpTable` (the project's one table type): each entry names
its build function in ``graph.py`` (which emits the nodes) and renders the same nodes as text
(``rosetta.backends.snippet.Snippet``), the engines' ``source.py``. Layouts: the graph computes
in the canonical NCHW / (N, T) layouts, so conv kernels (OIHW), the channel-major flatten and
dense kernels (in, out) pass unchanged; only the GRU's kernels are transposed (ONNX's ``W``, ``R``
are ``(1, 3H, in)``), its gate blocks z | r | h being ONNX's own order.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, OpTable, Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, add_branches, fmt_shape, statements
from rosetta.spec import ops

NAME = "onnx"


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
    },
    sequence=Entry("sequence", sequence),
    residual=Entry("residual", residual),
)
RENDER = OPS.rendering()
