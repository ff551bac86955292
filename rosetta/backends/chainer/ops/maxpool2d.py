"""maxpool2d in Chainer: ``F.max_pooling_2d`` with ``cover_all=False`` (the spec's floor) and
``pad=(ph, pw)`` when the padding is symmetric (padded cells are -inf); an asymmetric one is
-inf padded first (``F.pad``, ``lowering.Padded``: a padded cell never wins) and the pooling
runs unpadded. No parameters.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from rosetta.backends.chainer.ops import explicit_pad, pair, symmetric
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.MaxPool2D, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import F, Padded

    pad = symmetric(op.padding)
    # cover_all=False: output (H + 2p - k) // s + 1, the spec's floor; Chainer's default
    # (True) rounds up and adds a row/column of partial windows (17x17 instead of 16x16 after
    # ResNet's stem at 64x64)
    pool = functools.partial(
        F.max_pooling_2d, ksize=op.kernel, stride=op.stride, pad=pad or 0, cover_all=False
    )
    return pool if pad is not None else Padded(op.padding, -np.inf, pool)


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    pad = symmetric(op.padding)
    forward = [] if pad is not None else [explicit_pad(op.padding, '-float("inf")')]
    args = [pair(op.kernel), f"stride={pair(op.stride)}"]
    if pad and pad != (0, 0):
        args.append(f"pad={pair(pad)}")  # padded cells are -inf
    forward.append(
        f"{{x}} = F.max_pooling_2d({{x}}, {', '.join(args)}, cover_all=False)"
        f"  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=tuple(forward))
