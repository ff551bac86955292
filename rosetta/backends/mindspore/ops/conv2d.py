"""conv2d in MindSpore: ``nn.Conv2d`` on NCHW activations with ``pad_mode="pad"`` and the spec's
``(top, bottom, left, right)`` padding (``lowering.Conv2d``: in float64, which has no CPU kernel,
the same sum written out); the canonical OIHW kernel is ``weight``'s own layout, the bias as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.mindspore.ops import pad_text, pair
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


CONV2D = '''
class Conv2d(nn.Conv2d):
    """nn.Conv2d; in float64, which MindSpore's CPU Conv2D kernel does not take, the same sum
    written out: for each kernel offset (i, j), the strided window of the padded input times that
    offset's (out, in) weights, summed in offset order."""

    def construct(self, x):
        if x.dtype != ms.float64:
            return super().construct(x)
        p = (self.padding,) * 4 if isinstance(self.padding, int) else tuple(self.padding)
        xp = ops.pad(x, (p[2], p[3], p[0], p[1])) if any(p) else x  # (left, right, top, bottom)
        n, c, h, w = xp.shape
        (kh, kw), (sh, sw), g = self.kernel_size, self.stride, self.group
        ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
        out = None
        for i in range(kh):
            for j in range(kw):
                win = xp[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                win = win.reshape(n, g, c // g, ho * wo)  # (N, G, C/G, Ho*Wo)
                wk = self.weight[:, :, i, j].reshape(g, -1, c // g)  # (G, O/G, C/G)
                term = ops.matmul(wk, win)  # (N, G, O/G, Ho*Wo)
                out = term if out is None else out + term
        out = out.reshape(n, -1, ho, wo)
        return out + self.bias.reshape(1, -1, 1, 1) if self.has_bias else out
'''
HELPERS = {"Conv2d": CONV2D}


def build(op: ops.Conv2D, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import Conv2d

    conv = Conv2d(site.in_shape[0], op.out_channels, op.kernel, op.stride, op.padding, op.bias,
                  op.groups, ctx.ms_dtype)  # fmt: skip
    ctx.own(op, conv)
    return conv


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    args = [str(site.in_shape[0]), str(op.out_channels), pair(op.kernel)]
    if op.stride != (1, 1):
        args.append(f"stride={pair(op.stride)}")
    args.append('pad_mode="pad"')
    if any(op.padding):
        args.append(f"padding={pad_text(op.padding)}")
    if op.bias:
        args.append("has_bias=True")
    if op.groups != 1:
        args.append(f"group={op.groups}")
    args.append("dtype=dtype")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.weight", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.bias"))
    return Snippet(
        (f"self.{n} = Conv2d({', '.join(args)})",),
        (f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
        helpers=("Conv2d",),
    )


def weights(op: ops.Conv2D, m: nn.Cell) -> list[Binding]:
    out = [Binding(f"{op.name}.kernel", m.weight, True, same, same)]
    if op.bias:
        out.append(Binding(f"{op.name}.bias", m.bias, True, same, same))
    return out
