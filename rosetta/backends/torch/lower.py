"""The Rosetta of PyTorch: every op of the spec as PyTorch's own building block.

``LOWERINGS`` is the one table: op class -> a function ``(op, in_shape, at_input) -> nn.Module``
(``in_shape`` is the per-sample canonical input shape, ``at_input`` says whether the op reads
a tensor that someone else may still hold, so it must not work in place). ``build_net`` turns a
graph into a plain ``nn.Sequential`` of these modules (``print(net)`` is the architecture) and
lists which module owns the parameters of which parameterised op, for ``params.py``.

Nothing here converts weights: every layout and gate-order conversion lives in ``params.py``.
The modules compute in PyTorch's logical NCHW order whatever the memory format, so ``Flatten`` is
channel-major (the spec's ``CHW``) in ``channels_last`` too, and ``fc1`` needs no row permutation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from rosetta.backends.base import unsupported
from rosetta.spec import ops
from rosetta.spec.ops import Shape

NAME = "torch"


class Residual(nn.Module):
    """``body(x) + shortcut(x)``; an empty shortcut is the identity (ResNet's bottleneck add)."""

    def __init__(self, body: nn.Sequential, shortcut: nn.Sequential) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = self.shortcut(x)  # identity: x itself (the body never writes into its input)
        out = self.body(x)
        if out is side:  # an empty body: do not double x in place
            return out + side
        out += side  # in place, as torchvision's Bottleneck (autograd checks it is allowed)
        return out


class LastStepGRU(nn.Module):
    """``nn.GRU`` over batch-major ``(N, T, E)`` from a zero state; returns the last state."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h_n = self.gru(x)  # h_n: (num_layers=1, N, H)
        return h_n[0]  # (N, H): the last step's state


def _pads(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    """Symmetric ``(top, bottom, left, right)`` -> PyTorch's ``(h, w)``; None if asymmetric."""
    t, b, left, right = padding
    return (t, left) if (t == b and left == right) else None


def _conv2d(op: ops.Conv2D, in_shape: Shape, at_input: bool) -> nn.Module:
    sym = _pads(op.padding)
    conv = nn.Conv2d(
        in_shape[0],
        op.out_channels,
        op.kernel,
        stride=op.stride,
        padding=sym if sym is not None else 0,
        bias=op.bias,
    )
    if sym is not None:
        return conv
    t, b, left, right = op.padding
    return nn.Sequential(nn.ZeroPad2d((left, right, t, b)), conv)


def _maxpool2d(op: ops.MaxPool2D, in_shape: Shape, at_input: bool) -> nn.Module:
    sym = _pads(op.padding)
    if sym is not None and 2 * max(sym) <= min(op.kernel):  # what nn.MaxPool2d accepts
        return nn.MaxPool2d(op.kernel, op.stride, padding=sym)  # pads with -inf
    t, b, left, right = op.padding
    pad = nn.ConstantPad2d((left, right, t, b), float("-inf"))  # never selected, as the spec
    return nn.Sequential(pad, nn.MaxPool2d(op.kernel, op.stride))


def _relu(op: ops.ReLU, in_shape: Shape, at_input: bool) -> nn.Module:
    # in place except on a sequence's input (the caller's batch, or a residual's shared input)
    return nn.ReLU(inplace=not at_input)


def _dropout(op: ops.Dropout, in_shape: Shape, at_input: bool) -> nn.Module:
    return nn.Dropout(op.rate)  # inverted dropout, identity in eval(): the spec's rule


def _flatten(op: ops.Flatten, in_shape: Shape, at_input: bool) -> nn.Module:
    if op.order != "CHW":
        raise unsupported(NAME, op)
    return nn.Flatten(1)  # (N, C, H, W) -> (N, C*H*W), logical (channel-major) order


def _dense(op: ops.Dense, in_shape: Shape, at_input: bool) -> nn.Module:
    return nn.Linear(in_shape[0], op.units, bias=op.bias)


def _batchnorm(op: ops.BatchNorm, in_shape: Shape, at_input: bool) -> nn.Module:
    cls = nn.BatchNorm2d if len(in_shape) == 3 else nn.BatchNorm1d
    return cls(in_shape[0], eps=op.eps, momentum=op.momentum)  # kept in eval(): running stats


def _global_avgpool(op: ops.GlobalAvgPool, in_shape: Shape, at_input: bool) -> nn.Module:
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))  # (N, C, H, W) -> (N, C)


def _embedding(op: ops.Embedding, in_shape: Shape, at_input: bool) -> nn.Module:
    return nn.Embedding(op.vocab, op.dim)  # (N, T) -> (N, T, E); id 0 is an ordinary row


def _gru(op: ops.GRU, in_shape: Shape, at_input: bool) -> nn.Module:
    # the spec admits only z,r,h + reset_after, zero state, last output: exactly nn.GRU's
    # function (its r,z,n order is a weight layout, converted in params.py)
    if not op.reset_after or op.initial_state != "zeros" or op.output != "last":
        raise unsupported(NAME, op)
    return LastStepGRU(in_shape[1], op.units)


def _residual(op: ops.Residual, in_shape: Shape, at_input: bool) -> nn.Module:
    return Residual(_sequence(op.body, in_shape), _sequence(op.shortcut, in_shape))


LOWERINGS: dict[type, Callable[..., nn.Module]] = {
    ops.Conv2D: _conv2d,
    ops.MaxPool2D: _maxpool2d,
    ops.ReLU: _relu,
    ops.Dropout: _dropout,
    ops.Flatten: _flatten,
    ops.Dense: _dense,
    ops.BatchNorm: _batchnorm,
    ops.GlobalAvgPool: _global_avgpool,
    ops.Embedding: _embedding,
    ops.GRU: _gru,
    ops.Residual: _residual,
}


def lower_op(op: object, in_shape: Shape, at_input: bool = True) -> nn.Module:
    """The native module of one op, or the contract's ``unsupported`` error."""
    fn = LOWERINGS.get(type(op))
    if fn is None:
        raise unsupported(NAME, op)
    return fn(op, in_shape, at_input)


def _sequence(nodes: Sequence[ops.Node], in_shape: Shape) -> nn.Sequential:
    layers = []
    shape = in_shape
    for i, node in enumerate(nodes):
        layers.append(lower_op(node, shape, at_input=i == 0))
        shape = node.out_shape(shape)
    return nn.Sequential(*layers)


def build_net(graph: Sequence[ops.Node], in_shape: Shape) -> nn.Sequential:
    """The whole graph as one ``nn.Sequential`` (residuals nested as ``Residual`` modules)."""
    return _sequence(graph, in_shape)


def param_owners(graph: Sequence[ops.Node], net: nn.Sequential) -> list[tuple[object, nn.Module]]:
    """``(op, module holding its parameters)`` for every parameterised op, in graph order."""
    owners: list[tuple[object, nn.Module]] = []
    for node, module in zip(graph, net, strict=True):
        if isinstance(node, ops.Residual):
            owners += param_owners(node.body, module.body)
            owners += param_owners(node.shortcut, module.shortcut)
        elif isinstance(node, ops.Conv2D) and isinstance(module, nn.Sequential):
            owners.append((node, module[1]))  # (ZeroPad2d, Conv2d)
        elif isinstance(node, ops.GRU):
            owners.append((node, module.gru))
        elif isinstance(node, ops.Conv2D | ops.Dense | ops.BatchNorm | ops.Embedding):
            owners.append((node, module))
    return owners
