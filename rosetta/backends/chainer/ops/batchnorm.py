"""batchnorm in Chainer: ``lowering.InferenceBatchNorm`` (``L.BatchNormalization`` always in
test mode: running statistics, as the spec), its decay 1 - the spec's momentum. Weights: gamma
and beta are ``gamma``, ``beta``; mean and var the persistent ``avg_mean``, ``avg_var``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.chainer.ops import Read
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx

#: canonical role -> the BatchNormalization link's attribute
PATHS = {"gamma": "gamma", "beta": "beta", "mean": "avg_mean", "var": "avg_var"}


def build(op: ops.BatchNorm, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import InferenceBatchNorm

    # decay is Chainer's running-average weight of the old value: 1 - PyTorch's momentum
    bn = InferenceBatchNorm(
        site.in_shape[0], decay=1.0 - op.momentum, eps=op.eps, dtype=np.dtype(ctx.dtype)
    )
    return ctx.own(op, bn)


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    roles = (("gamma", "gamma"), ("beta", "beta"), ("mean", "avg_mean"), ("var", "avg_var"))
    decay = round(1.0 - op.momentum, 12)  # Chainer's decay is 1 - PyTorch's momentum
    return Snippet(
        (f"self.{n} = L.BatchNormalization({site.in_shape[0]}, eps={op.eps}, decay={decay})",),
        (f"{{x}} = self.{n}({{x}})  # running statistics when config.train is False",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{k}") for c, k in roles),
    )


def to_native(op: ops.BatchNorm, params) -> dict:
    return {path: params[f"{op.name}.{role}"] for role, path in PATHS.items()}


def to_canonical(op: ops.BatchNorm, read: Read) -> dict:
    return {f"{op.name}.{role}": read(path) for role, path in PATHS.items()}
