"""layer_norm in Chainer: ``lowering.LayerNorm``, ``F.layer_normalization`` over the last axis
on (N*T, E) rows (biased variance, eps inside the root). Weights: ``gamma``, ``beta`` as they
are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.LayerNorm, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import LayerNorm

    return ctx.own(op, LayerNorm(site.in_shape[-1], op.eps))


def render(op: ops.LayerNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    e = site.in_shape[-1]
    return Snippet(
        (f"self.{n} = L.LayerNormalization({e}, eps={op.eps})",),
        (f"{{x}} = F.reshape(self.{n}(F.reshape({{x}}, (-1, {e}))), {{x}}.shape)",),
        (
            Weight(f"{op.name}.gamma", f"model.{n}.gamma"),
            Weight(f"{op.name}.beta", f"model.{n}.beta"),
        ),
    )


def to_native(op: ops.LayerNorm, params) -> dict:
    return {"gamma": params[f"{op.name}.gamma"], "beta": params[f"{op.name}.beta"]}


def to_canonical(op: ops.LayerNorm, read: Read) -> dict:
    return {f"{op.name}.gamma": read("gamma"), f"{op.name}.beta": read("beta")}
