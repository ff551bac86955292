"""dense in Chainer: ``L.Linear`` (``lowering.SeqLinear`` on (N, T, I): every position alike).
Weights: ``W`` is (out, in), the transpose of the canonical IO kernel (the rows of a kernel
after a flatten stay in the C, H, W order, the activations being NCHW); ``b`` the bias. AdamW
may decay the kernel (``decay_paths``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Dense, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import L, SeqLinear

    cls = SeqLinear if len(site.in_shape) == 2 else L.Linear  # (T, I): every position
    return ctx.own(op, cls(site.in_shape[-1], op.units, nobias=not op.bias))


def render(op: ops.Dense, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    nobias = "" if op.bias else ", nobias=True"
    weights = [Weight(f"{op.name}.kernel", f"model.{n}.W", "a.T", "a.T", note="IO -> (out, in)")]
    if op.bias:
        weights.append(Weight(f"{op.name}.bias", f"model.{n}.b"))
    axes = ", n_batch_axes=2" if len(site.in_shape) == 2 else ""  # (N, T, I): every position
    return Snippet(
        (f"self.{n} = L.Linear({site.in_shape[-1]}, {op.units}{nobias})",),
        (f"{{x}} = self.{n}({{x}}{axes})  # {fmt_shape(site.out_shape)}",),
        tuple(weights),
        notes=(f"{op.name}.kernel: IO -> Linear.W (out, in), transposed",),
    )


def to_native(op: ops.Dense, params) -> dict:
    out = {"W": params[f"{op.name}.kernel"].T}  # (I, O) -> Chainer's (O, I)
    if op.bias:
        out["b"] = params[f"{op.name}.bias"]
    return out


def to_canonical(op: ops.Dense, read: Read) -> dict:
    out = {f"{op.name}.kernel": read("W").T}  # (O, I) -> (I, O)
    if op.bias:
        out[f"{op.name}.bias"] = read("b")
    return out


def decay_paths(op: ops.Dense) -> dict[str, str]:
    """The link attribute of each canonical parameter AdamW may decay."""
    return {f"{op.name}.kernel": "W"}
