"""conv2d in Chainer: ``L.Convolution2D`` with ``pad=(ph, pw)`` when the padding is symmetric;
an asymmetric one is zeros padded first (``F.pad``, ``lowering.Padded``) and the convolution
runs unpadded. Weights: ``W`` is OIHW, the canonical kernel unchanged; ``b`` the bias.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read, explicit_pad, pair, symmetric
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Conv2D, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import L, Padded

    pad = symmetric(op.padding)
    conv = L.Convolution2D(
        site.in_shape[0],
        op.out_channels,
        ksize=op.kernel,
        stride=op.stride,
        pad=pad or 0,
        nobias=not op.bias,
        groups=op.groups,
    )
    ctx.own(op, conv)
    return conv if pad is not None else Padded(op.padding, 0.0, conv)


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    pad = symmetric(op.padding)
    args = [str(site.in_shape[0]), str(op.out_channels), f"ksize={pair(op.kernel)}"]
    if op.stride != (1, 1):
        args.append(f"stride={pair(op.stride)}")
    if pad and pad != (0, 0):
        args.append(f"pad={pair(pad)}")
    if not op.bias:
        args.append("nobias=True")
    if op.groups != 1:
        args.append(f"groups={op.groups}")
    forward = [] if pad is not None else [explicit_pad(op.padding, "0")]
    forward.append(f"{{x}} = self.{n}({{x}})  # {fmt_shape(site.out_shape)}")
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.W", note="OIHW, as stored")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.b"))
    return Snippet(
        (f"self.{n} = L.Convolution2D({', '.join(args)})",), tuple(forward), tuple(weights)
    )


def to_native(op: ops.Conv2D, params) -> dict:
    out = {"W": params[f"{op.name}.kernel"]}  # OIHW both sides
    if op.bias:
        out["b"] = params[f"{op.name}.bias"]
    return out


def to_canonical(op: ops.Conv2D, read: Read) -> dict:
    out = {f"{op.name}.kernel": read("W")}
    if op.bias:
        out[f"{op.name}.bias"] = read("b")
    return out
