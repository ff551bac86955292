"""The spec's optimisers on MindSpore, written in MindSpore ops.

MindSpore's stock optimisers differ from the spec's rules where the gate would see it:

- ``nn.Adam`` takes Keras' epsilon placement (``lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)``,
  ``w -= lr_t m / (sqrt(v) + eps)``: epsilon not scaled by the bias correction), where the
  spec's Algorithm 1 adds epsilon to ``sqrt(v_hat)``;
- ``nn.AdamWeightDecay`` has no bias correction at all (BERT's optimiser);
- ``nn.Momentum`` computes the spec's form but takes ``momentum`` as a float32 attribute.

So each rule is written here as a ``nn.Cell`` whose ``construct(grads, ...)`` updates the
parameters in place with ``ops.assign`` (PyNative, and traceable by ``mindspore.jit``), every
hyper-parameter a 0-d tensor of the parameter's dtype, the reference's order of operations
(``rosetta/backends/numpy_ref/optim.py``); the bias corrections ``1 - beta^t`` are formed in
Python (float64) each step and rounded once, as the reference does.

In float32, Adam's update runs in MindSpore's fused ``ops.Adam`` kernel (one kernel per parameter
where the written-out rule launches ten PyNative ops; the kernel has no float64), given the inputs
that make its rule the spec's, as TensorFlow's backend does: the kernel computes ``lr sqrt(1 -
beta2^t) / (1 - beta1^t) m / (sqrt(v) + eps')``, which is the spec's ``lr (m / c1) / (sqrt(v /
c2) + eps)`` when ``eps' = eps sqrt(c2)`` (formed in Python each step, like ``c``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rosetta.backends.mindspore.compat import ms
from rosetta.spec.workload import SGD, Adam, AdamW

nn, ops = ms.nn, ms.ops


def _const(value: float, p: ms.Parameter) -> ms.Tensor:
    """``value`` rounded once to ``p``'s dtype, a 0-d tensor."""
    return ms.Tensor(np.asarray(value, dtype=np.dtype(str(p.dtype).lower())))


def _zeros_like(p: ms.Parameter, tag: str) -> ms.Parameter:
    return ms.Parameter(ops.zeros(p.shape, p.dtype), name=f"{tag}.{p.name}", requires_grad=False)


class SpecSGD(nn.Cell):
    """The spec's SGD with (Nesterov) momentum, per parameter (``buf`` starts at 0, so the
    first step has ``buf = g`` exactly)::

        buf = momentum * buf + g
        w -= lr * buf                      # or, Nesterov: w -= lr * (g + momentum * buf)
    """

    def __init__(self, spec: SGD, params: Sequence[ms.Parameter]) -> None:
        super().__init__()
        self.params = ms.ParameterTuple(params)
        self.momentum = float(spec.momentum)
        self.nesterov = bool(spec.nesterov)
        self.lr = [_const(spec.lr, p) for p in params]
        self.mu = [_const(spec.momentum, p) for p in params]
        self.bufs = ms.ParameterTuple([_zeros_like(p, "buf") for p in params]) \
            if self.momentum else ()  # fmt: skip

    def inputs(self) -> tuple:
        """What the next step takes beside the gradients: nothing."""
        return ()

    def construct(self, grads):
        for i in range(len(self.params)):
            p, g = self.params[i], grads[i]
            if not self.momentum:
                ops.assign(p, p - self.lr[i] * g)
                continue
            buf = self.bufs[i] * self.mu[i] + g
            ops.assign(self.bufs[i], buf)
            step = g + self.mu[i] * buf if self.nesterov else buf
            ops.assign(p, p - self.lr[i] * step)
        return True

    def restart(self) -> None:
        """Fresh state (loading weights restarts training)."""
        for b in self.bufs:
            ops.assign(b, ops.zeros(b.shape, b.dtype))  # in place: a compiled step reads it


class SpecAdam(nn.Cell):
    """The spec's Adam (Kingma & Ba's Algorithm 1) and AdamW (decoupled decay on the
    parameters ``decays`` names, from the weight alone, first), per parameter::

        w -= lr * weight_decay * w                      # AdamW, decayed parameters only
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        w -= lr * (m / c1) / (sqrt(v / c2) + eps)       # c = 1 - beta^t, given each step
    """

    def __init__(self, spec: Adam | AdamW, params: Sequence[ms.Parameter],
                 decayed: Sequence[bool]) -> None:  # fmt: skip
        super().__init__()
        self.spec = spec
        self.params = ms.ParameterTuple(params)
        self.decayed = tuple(bool(d) for d in decayed)
        wd = float(getattr(spec, "weight_decay", 0.0))
        self.lr = [_const(spec.lr, p) for p in params]
        self.lr_wd = [_const(spec.lr, p) * _const(wd, p) for p in params]  # rounded, then *
        self.b1 = [_const(spec.beta1, p) for p in params]
        self.b2 = [_const(spec.beta2, p) for p in params]
        self.omb1 = [_const(1 - spec.beta1, p) for p in params]  # formed in Python, rounded once
        self.omb2 = [_const(1 - spec.beta2, p) for p in params]
        self.eps = [_const(spec.eps, p) for p in params]
        self.m = ms.ParameterTuple([_zeros_like(p, "m") for p in params])
        self.v = ms.ParameterTuple([_zeros_like(p, "v") for p in params])
        self.t = 0

    def inputs(self) -> tuple[tuple[ms.Tensor, ...], tuple[ms.Tensor, ...]]:
        """What the next step takes beside the gradients: its ``1 - beta1^t`` and ``1 -
        beta2^t`` in each parameter's dtype, formed here, outside any compiled step (the step
        count advanced: call once per step)."""
        self.t += 1
        c1 = 1 - self.spec.beta1**self.t
        c2 = 1 - self.spec.beta2**self.t
        return tuple(_const(c1, p) for p in self.params), tuple(_const(c2, p) for p in self.params)

    def construct(self, grads, c1, c2):
        for i in range(len(self.params)):
            p, g = self.params[i], grads[i]
            if self.decayed[i]:
                ops.assign(p, p - self.lr_wd[i] * p)
            m = self.m[i] * self.b1[i] + self.omb1[i] * g
            v = self.v[i] * self.b2[i] + self.omb2[i] * (g * g)
            ops.assign(self.m[i], m)
            ops.assign(self.v[i], v)
            step = m / c1[i] * self.lr[i] / (ops.sqrt(v / c2[i]) + self.eps[i])
            ops.assign(p, p - step)
        return True

    def restart(self) -> None:
        """Fresh state (loading weights restarts training)."""
        self.t = 0
        for s in (*self.m, *self.v):
            ops.assign(s, ops.zeros(s.shape, s.dtype))  # in place: a compiled step reads it


class FusedAdam(SpecAdam):
    """The spec's Adam and AdamW in float32 through MindSpore's ``ops.Adam`` kernel (see the
    module docstring for the inputs that make its rule the spec's)."""

    def __init__(self, spec: Adam | AdamW, params: Sequence[ms.Parameter],
                 decayed: Sequence[bool]) -> None:  # fmt: skip
        super().__init__(spec, params, decayed)
        self.adam = ops.Adam()

    def inputs(self) -> tuple[ms.Tensor, ms.Tensor, ms.Tensor]:
        """The next step's ``beta1^t``, ``beta2^t`` and ``eps sqrt(1 - beta2^t)`` (float32, formed
        in float64 here; the step count advanced: call once per step)."""
        self.t += 1
        b1t, b2t = self.spec.beta1**self.t, self.spec.beta2**self.t
        eps = self.spec.eps * (1 - b2t) ** 0.5
        return tuple(ms.Tensor(np.float32(v)) for v in (b1t, b2t, eps))

    def construct(self, grads, b1t, b2t, eps):
        for i in range(len(self.params)):
            p = self.params[i]
            if self.decayed[i]:
                ops.assign(p, p - self.lr_wd[i] * p)
            self.adam(p, self.m[i], self.v[i], b1t, b2t, self.lr[i], self.b1[i], self.b2[i],
                      eps, grads[i])  # fmt: skip
        return True


def make_optimizer(spec, params: Sequence[ms.Parameter], names: Sequence[str]):
    """The spec's optimiser over ``params`` (canonical ``names`` beside them), or None: Adam and
    AdamW in MindSpore's fused kernel where every parameter is float32."""
    if isinstance(spec, Adam | AdamW):
        decayed = [spec.decays(n) for n in names] if isinstance(spec, AdamW) else [False] * len(
            params
        )
        fused = all(p.dtype == ms.float32 for p in params)
        return (FusedAdam if fused else SpecAdam)(spec, params, decayed)
    if isinstance(spec, SGD):
        return SpecSGD(spec, params)
    return None


def describe(optimizer) -> str:
    """The optimiser for the manifest."""
    if optimizer is None:
        return "none (forward only)"
    if isinstance(optimizer, SpecAdam):
        kind = "AdamW" if any(optimizer.decayed) else "Adam"
        how = (
            "MindSpore's fused ops.Adam kernel given eps sqrt(1 - beta2^t)"
            if isinstance(optimizer, FusedAdam)
            else "MindSpore ops"
        )
        return (
            f"spec {kind} in {how} (nn.Adam puts epsilon outside the bias correction, "
            "Keras' placement; nn.AdamWeightDecay has no bias correction)"
        )
    return "spec SGD (momentum, Nesterov) in MindSpore ops (nn.Momentum: momentum as float32)"
