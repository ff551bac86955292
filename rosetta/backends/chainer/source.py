"""The Rosetta of Chainer, in text: each op of the spec as the ``chainer.links``/``functions``
source that says it.

``RENDER`` is keyed by the same op classes as ``lowering.TABLE``. Chainer is NCHW throughout, so
OIHW kernels and the C, H, W flatten pass unchanged; ``L.Linear.W`` is (out, in), the canonical
IO kernel transposed; ``L.NStepGRU`` holds six weight matrices and six biases, ``w0..w2`` for the
input gates r, z, h and ``w3..w5`` for the recurrent ones (reset applied after the recurrent
matmul, the spec's reset_after), so each canonical GRU tensor is split into three column blocks
(the gate order z | r | h becoming r, z, h). Text only.
"""

from __future__ import annotations

from rosetta.backends.driver import Entry, OpTable, Site
from rosetta.backends.snippet import (
    RenderCtx,
    Snippet,
    Weight,
    add_branches,
    attr,
    fmt_shape,
    statements,
)
from rosetta.spec import ops

NAME = "chainer"
CHAINER_GATES = {"r": 0, "z": 1, "h": 2}  # NStepGRU's index of each gate (chainer n_step_gru)


def _pair(p: tuple[int, int]) -> str:
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def _sym(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    t, b, left, right = padding
    return (t, left) if t == b and left == right else None


def _explicit_pad(padding: tuple[int, int, int, int], value: str) -> str:
    t, b, left, right = padding
    return (
        f'{{x}} = F.pad({{x}}, ((0, 0), (0, 0), ({t}, {b}), ({left}, {right})), "constant", '
        f"constant_values={value})  # asymmetric padding"
    )


def conv2d(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    pad = _sym(op.padding)
    args = [str(site.in_shape[0]), str(op.out_channels), f"ksize={_pair(op.kernel)}"]
    if op.stride != (1, 1):
        args.append(f"stride={_pair(op.stride)}")
    if pad and pad != (0, 0):
        args.append(f"pad={_pair(pad)}")
    if not op.bias:
        args.append("nobias=True")
    forward = [] if pad is not None else [_explicit_pad(op.padding, "0")]
    forward.append(f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.W", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.b"))
    return Snippet(
        (f"self.{n} = L.Convolution2D({', '.join(args)})",), tuple(forward), tuple(weights)
    )


def maxpool2d(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    pad = _sym(op.padding)
    forward = [] if pad is not None else [_explicit_pad(op.padding, '-float("inf")')]
    args = [_pair(op.kernel), f"stride={_pair(op.stride)}"]
    if pad and pad != (0, 0):
        args.append(f"pad={_pair(pad)}")  # padded cells are -inf
    forward.append(
        f"{{x}} = F.max_pooling_2d({{x}}, {', '.join(args)}, cover_all=False)"
        f"  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=tuple(forward))


def relu(op: ops.ReLU, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=("{x} = F.relu({x})",))


def dropout(op: ops.Dropout, site: Site, ctx: RenderCtx) -> Snippet:
    return Snippet(forward=(f"{{x}} = F.dropout({{x}}, {op.rate})  # off unless config.train",))


def flatten(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = F.reshape({{x}}, ({{x}}.shape[0], -1))  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))


def dense(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    nobias = "" if op.bias else ", nobias=True"
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.W", "a.T", "a.T", note="IO -> (out, in)")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.b"))
    return Snippet(
        (f"self.{n} = L.Linear({site.in_shape[0]}, {op.units}{nobias})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
        notes=(f"{op.name}.kernel: IO -> Linear.W (out, in), transposed",),
    )


def batchnorm(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    roles = (("gamma", "gamma"), ("beta", "beta"), ("mean", "avg_mean"), ("var", "avg_var"))
    decay = round(1.0 - op.momentum, 12)  # Chainer's decay is 1 - PyTorch's momentum
    return Snippet(
        (f"self.{n} = L.BatchNormalization({site.in_shape[0]}, eps={op.eps}, decay={decay})",),
        (f"{{x}} = self.{n}({{x}})  # running statistics when config.train is False",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{k}") for c, k in roles),
    )


def global_avgpool(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = F.average({{x}}, axis=(2, 3))  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))


def embedding(op: ops.Embedding, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    return Snippet(
        (f"self.{n} = L.EmbedID({op.vocab}, {op.dim})",),
        (
            f"{{x}} = self.{n}({{x}})  # ids {fmt_shape(site.in_shape)} -> "
            f"{fmt_shape(site.out_shape)}",
        ),
        (Weight(f"{op.name}.table", f"model.{n}.W"),),
    )


def gru(op: ops.GRU, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    h = op.units
    weights = []
    for canonical, offset, kind, transpose in (
        ("kernel", 0, "ws", True),
        ("recurrent_kernel", 3, "ws", True),
        ("bias_input", 0, "bs", False),
        ("bias_recurrent", 3, "bs", False),
    ):
        for pos, gate in enumerate(op.gate_order):  # z, r, h: column blocks of the spec
            i = CHAINER_GATES[gate] + offset
            cols = f"{pos * h}:{(pos + 1) * h}"
            weights.append(
                Weight(
                    f"{op.name}.{canonical}",
                    f"model.{n}.{kind}[0][{i}]",
                    "a.T" if transpose else "a",
                    "a.T" if transpose else "a",
                    canonical_part=f"np.s_[:, {cols}]" if transpose else f"np.s_[{cols}]",
                    note=f"gate {gate} -> {kind[0]}{i}",
                )
            )
    return Snippet(
        (f"self.{n} = L.NStepGRU(1, {site.in_shape[1]}, {h}, 0.0)",),
        (
            f"hy, _ = self.{n}(None, F.separate({{x}}, axis=0))  # N x (T, E); hy: (1, N, H)",
            f"{{x}} = hy[0]  # {fmt_shape(site.out_shape)}, the last step's state",
        ),
        tuple(weights),
        notes=("GRU: z | r | h column blocks split into NStepGRU's w0..w5 (r=0, z=1, h=2)",),
    )


def sequence(parts: list[Snippet], site: Site, ctx: RenderCtx) -> Snippet:
    """Forward lines one after the other, on one variable."""
    return statements(parts)


def residual(body: Snippet, shortcut: Snippet, site: Site, ctx: RenderCtx) -> Snippet:
    """The block's input kept aside, the body, the shortcut on the kept input, their sum."""
    return add_branches(body, shortcut, site, "{x} = {x} + {s}  # " + fmt_shape(site.out_shape))


#: the backend's one op table: each op's build function (named: lowering.py) and its source
#: rendering (here); ``lowering.TABLE`` and ``RENDER`` are its two faces
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
