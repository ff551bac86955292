"""Optimisers of the NumPy reference: SGD (with momentum / Nesterov) and Adam.

Both act **in place** on a dict of NumPy arrays keyed by canonical parameter name (e.g.
``"conv1.kernel"``), given a dict of gradients with the same keys. Parameters without a gradient
(absent or None, e.g. BatchNorm buffers) are skipped and get no state. State is kept per name in
the parameter's dtype, and every hyper-parameter is cast to that dtype before use, so float32
parameters are updated in float32 arithmetic, as the frameworks do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["SGD", "Adam", "AdamW"]


def _checked_grad(name: str, p: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The gradient of ``p`` as an array of ``p``'s shape and dtype."""
    if not isinstance(p, np.ndarray):
        raise TypeError(f"parameter {name!r} must be a NumPy array to be updated in place")
    g = np.asarray(g)
    if g.shape != p.shape:
        raise ValueError(f"gradient of {name!r} has shape {g.shape}, parameter has {p.shape}")
    return g.astype(p.dtype, copy=False)


def _pairs(params: dict[str, np.ndarray], grads: dict[str, np.ndarray | None]):
    """Yield ``(name, param, grad)`` for every parameter that has a gradient."""
    unknown = set(grads) - set(params)
    if unknown:
        raise KeyError(f"gradients for unknown parameters: {sorted(unknown)}")
    for name, p in params.items():
        g = grads.get(name)
        if g is not None:
            yield name, p, _checked_grad(name, p, g)


class SGD:
    """Stochastic gradient descent with optional (Nesterov) momentum, in PyTorch's form.

    Per parameter ``w`` with gradient ``g`` and buffer ``buf`` (starting at 0, so the first step
    has ``buf = g``)::

        buf = momentum * buf + g
        w -= lr * buf                          # plain momentum
        w -= lr * (g + momentum * buf)         # nesterov=True

    With ``momentum = 0`` this is ``w -= lr * g``. For a constant ``lr`` this is exactly the
    Keras/Chainer form ``v = momentum * v - lr * g; w += v`` (Nesterov: ``w += momentum * v -
    lr * g``), since ``v = -lr * buf`` at every step; the two differ only in float rounding.
    """

    def __init__(self, lr: float, momentum: float = 0.0, nesterov: bool = False) -> None:
        if lr < 0 or momentum < 0:
            raise ValueError(f"SGD needs lr >= 0 and momentum >= 0, got {lr}, {momentum}")
        if nesterov and momentum == 0:
            raise ValueError("SGD: nesterov=True requires momentum > 0")
        self.lr = lr
        self.momentum = momentum
        self.nesterov = nesterov
        self.buffers: dict[str, np.ndarray] = {}  # momentum buffer per parameter name

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Update every parameter of ``params`` that has a gradient in ``grads``, in place."""
        for name, p, g in _pairs(params, grads):
            lr = p.dtype.type(self.lr)
            if self.momentum == 0:
                p -= lr * g
                continue
            mu = p.dtype.type(self.momentum)
            buf = self.buffers.get(name)
            if buf is None:
                buf = self.buffers[name] = g.copy()  # momentum * 0 + g
            else:
                buf *= mu
                buf += g
            if self.nesterov:
                p -= lr * (g + mu * buf)
            else:
                p -= lr * buf

    def state_dict(self) -> dict[str, dict[str, np.ndarray]]:
        """A copy of the state: ``{"momentum_buffer": {name: array}}``."""
        return {"momentum_buffer": {k: v.copy() for k, v in self.buffers.items()}}


class Adam:
    """Adam (Kingma & Ba 2015, Algorithm 1), in the PyTorch/Optax form.

    Per parameter ``w`` with gradient ``g``, moments ``m = v = 0`` and step count ``t = 0`` at
    start::

        t += 1
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat = m / (1 - beta1**t)
        v_hat = v / (1 - beta2**t)
        w -= lr * m_hat / (sqrt(v_hat) + eps)

    Keras and Chainer put ``eps`` outside the bias correction: ``lr_t = lr * sqrt(1 - beta2**t) /
    (1 - beta1**t)``, ``w -= lr_t * m / (sqrt(v) + eps)``, i.e. the same update with ``eps``
    replaced by ``eps * sqrt(1 - beta2**t)``; the two agree whenever ``sqrt(v_hat) >> eps``.
    The step count is kept per parameter (as PyTorch does); it equals the global count when every
    parameter gets a gradient at every step.
    """

    def __init__(
        self, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        if lr < 0 or not (0 <= beta1 < 1 and 0 <= beta2 < 1) or eps < 0:
            raise ValueError(
                f"Adam: invalid hyper-parameters lr={lr} betas={beta1, beta2} eps={eps}"
            )
        self.lr = lr
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t: dict[str, int] = {}

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Update every parameter of ``params`` that has a gradient in ``grads``, in place."""
        for name, p, g in _pairs(params, grads):
            dt = p.dtype.type
            t = self.t.get(name, 0) + 1
            self.t[name] = t
            if name not in self.m:  # zeros at the first step only (not built and dropped later)
                self.m[name], self.v[name] = np.zeros_like(p), np.zeros_like(p)
            m, v = self.m[name], self.v[name]
            # moments, in place, in p's dtype; (1 - beta) is formed in Python then rounded once
            m *= dt(self.beta1)
            m += dt(1 - self.beta1) * g
            v *= dt(self.beta2)
            v += dt(1 - self.beta2) * (g * g)
            # bias corrections formed in Python (float64) and rounded once to p's dtype
            # p -= lr * m_hat / (sqrt(v_hat) + eps): those operations in that order, two
            # temporaries reused in place (the optimiser's passes run over every parameter)
            step = m / dt(1 - self.beta1**t)  # m_hat
            step *= dt(self.lr)
            denom = v / dt(1 - self.beta2**t)  # v_hat
            np.sqrt(denom, out=denom)
            denom += dt(self.eps)
            step /= denom
            p -= step

    def state_dict(self) -> dict[str, dict]:
        """A copy of the state: ``{"step": {name: t}, "m": {name: array}, "v": {...}}``."""
        return {
            "step": dict(self.t),
            "m": {k: a.copy() for k, a in self.m.items()},
            "v": {k: a.copy() for k, a in self.v.items()},
        }


class AdamW(Adam):
    """Adam with decoupled weight decay (PyTorch's ``AdamW``, Optax's ``adamw``), on the
    parameters ``decays(name)`` selects::

        w -= lr * weight_decay * w             # decayed parameters only, from the weight alone
        w -= lr * m_hat / (sqrt(v_hat) + eps)  # Adam's step; m, v never see the decay

    The two lines commute (Adam's step does not read ``w``): this is ``w -= lr * (m_hat /
    (sqrt(v_hat) + eps) + weight_decay * w)`` with ``w`` the weight before the step.
    """

    def __init__(
        self,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        decays: Callable[[str], bool],
    ) -> None:
        super().__init__(lr=lr, beta1=beta1, beta2=beta2, eps=eps)
        if not 0 <= weight_decay < 1:
            raise ValueError(f"AdamW: weight_decay must be in [0, 1), got {weight_decay}")
        self.weight_decay = weight_decay
        self.decays = decays

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Decay the selected parameters that have a gradient, then Adam's step, in place."""
        for name, p, _ in _pairs(params, grads):
            if self.decays(name):
                dt = p.dtype.type
                p -= dt(self.lr) * dt(self.weight_decay) * p
        super().step(params, grads)


def make_optimizer(optimizer) -> SGD | Adam | None:
    """The spec's optimiser (``rosetta.spec.workload.SGD``/``Adam``/``AdamW``), or None
    (forward only)."""
    from rosetta.spec.workload import SGD as SpecSGD
    from rosetta.spec.workload import Adam as SpecAdam
    from rosetta.spec.workload import AdamW as SpecAdamW

    if isinstance(optimizer, SpecAdamW):
        return AdamW(
            lr=optimizer.lr,
            beta1=optimizer.beta1,
            beta2=optimizer.beta2,
            eps=optimizer.eps,
            weight_decay=optimizer.weight_decay,
            decays=optimizer.decays,
        )

    if isinstance(optimizer, SpecSGD):
        return SGD(lr=optimizer.lr, momentum=optimizer.momentum, nesterov=optimizer.nesterov)
    if isinstance(optimizer, SpecAdam):
        return Adam(
            lr=optimizer.lr, beta1=optimizer.beta1, beta2=optimizer.beta2, eps=optimizer.eps
        )
    return None
