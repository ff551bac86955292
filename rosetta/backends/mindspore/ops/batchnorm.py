"""batchnorm in MindSpore: ``nn.BatchNorm2d``/``1d`` with ``use_batch_statistics=False``, the
spec's inference-mode statistics, never updated (``lowering.BatchNorm``: in float64, which has no
CPU kernel, the same normalisation written out); its momentum is 1 - the spec's (PyTorch's);
``gamma, beta, mean, var`` are ``gamma, beta, moving_mean, moving_variance``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.binding import Binding, same
from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


BATCH_NORM = '''
class BatchNorm(nn.Cell):
    """Inference-mode batch normalisation (the held statistics, never updated):
    nn.BatchNorm2d/1d(use_batch_statistics=False), whose momentum is 1 - PyTorch's. In float64,
    which MindSpore's CPU BatchNorm kernel does not take, (x - mean) / sqrt(var + eps) * gamma +
    beta written out."""

    def __init__(self, channels, eps, momentum, image, dtype):
        super().__init__()
        cls = nn.BatchNorm2d if image else nn.BatchNorm1d
        self.bn = cls(channels, eps=eps, momentum=momentum, use_batch_statistics=False,
                      dtype=dtype)
        self.eps = ms.Tensor(eps, dtype)
        self.shape = (1, channels, 1, 1) if image else (1, channels)

    def construct(self, x):
        if x.dtype != ms.float64:
            return self.bn(x)
        bn, s = self.bn, self.shape
        std = ops.sqrt(bn.moving_variance.reshape(s) + self.eps)
        return (x - bn.moving_mean.reshape(s)) / std * bn.gamma.reshape(s) + bn.beta.reshape(s)
'''
HELPERS = {"BatchNorm": BATCH_NORM}


def build(op: ops.BatchNorm, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import BatchNorm

    cell = BatchNorm(site.in_shape[0], op.eps, op.momentum, len(site.in_shape) == 3, ctx.ms_dtype)
    ctx.own(op, cell)
    return cell


def render(op: ops.BatchNorm, site: Site, ctx: RenderCtx) -> Snippet:
    n = attr(op.name)
    kind = "BatchNorm2d" if len(site.in_shape) == 3 else "BatchNorm1d"
    roles = (("gamma", "bn.gamma"), ("beta", "bn.beta"), ("mean", "bn.moving_mean"),
             ("var", "bn.moving_variance"))  # fmt: skip
    m = round(1.0 - op.momentum, 12)
    return Snippet(
        (f"self.{n} = BatchNorm({site.in_shape[0]}, eps={op.eps}, momentum={m}, "
         f"image={kind == 'BatchNorm2d'}, dtype=dtype)",),  # fmt: skip
        (f"{{x}} = self.{n}({{x}})",),
        tuple(Weight(f"{op.name}.{c}", f"model.{n}.{t}") for c, t in roles),
        helpers=("BatchNorm",),
        notes=(f"{op.name}: MindSpore's momentum is 1 - the spec's (PyTorch's) {op.momentum}",),
    )


def weights(op: ops.BatchNorm, m: nn.Cell) -> list[Binding]:
    bn = m.bn
    return [
        Binding(f"{op.name}.gamma", bn.gamma, True, same, same),
        Binding(f"{op.name}.beta", bn.beta, True, same, same),
        Binding(f"{op.name}.mean", bn.moving_mean, False, same, same),
        Binding(f"{op.name}.var", bn.moving_variance, False, same, same),
    ]
