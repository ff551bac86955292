"""The spec's optimisers on Paddle, and which of Paddle's rules match the spec's.

Checked in float64 against ``rosetta/backends/numpy_ref/optim.py``
(``tests/test_backend_paddle.py``):

- **Adam**: ``paddle.optimizer.Adam`` *is* the spec's rule (Kingma & Ba's Algorithm 1, epsilon
  added to ``sqrt(v_hat)``, bias correction from its ``beta1_pow``/``beta2_pow`` accumulators,
  kept in the parameter's dtype): bit-identical to the reference over steps whose gradients sit
  near epsilon, where Keras' and Chainer's placement would show. Used as is, every dtype.
- **SGD with momentum**: ``paddle.optimizer.Momentum`` computes the spec's form (``velocity =
  mu * velocity + g; w -= lr * velocity``; Nesterov ``w -= lr * (g + mu * velocity)``), but its
  kernel takes ``mu`` as a float32 attribute: in float64 the momentum is 0.9 rounded to float32
  (0.899999976...), a relative deviation of 2.6e-8 in every velocity, which the float64 gate's
  bound (1e-8 of each parameter's change) sees. In float32 that rounding is the dtype's own (the
  reference rounds ``mu`` to the parameter dtype too), and Paddle's fused kernel is used. In
  float64 :class:`SpecMomentum` writes the same rule in Paddle tensor ops, the hyper-parameters
  as tensors of the parameter's dtype (the reference's order of operations).

- **AdamW**: ``paddle.optimizer.AdamW`` computes the spec's rule. Its CPU kernel (``adamw``)
  decays the weight before the step, from the weight alone (``w - lr * coeff * w``: the moments
  never see the decay), then takes Adam's step as ``lr_t = lr * sqrt(1 - beta2^t) / (1 -
  beta1^t)``, ``w -= lr_t * m / (sqrt(v) + eps * sqrt(1 - beta2^t))``: epsilon is scaled by the
  same ``sqrt(1 - beta2^t)`` as ``sqrt(v)``, which is ``lr * m_hat / (sqrt(v_hat) + eps)``, the
  spec's placement (not Keras', whose epsilon is unscaled). The spec's decay roles pick the
  tensors through ``apply_decay_param_fun`` (the Paddle names of the tensors whose canonical
  role decays); every other tensor runs Paddle's Adam kernel (``with_decay`` false). But, as
  Momentum's ``mu``, ``coeff`` reaches the kernel as a float32 attribute (Paddle 3.3.1): in
  float64 the decay is 0.01 rounded to float32 (0.0099999998), and nothing else differs
  (measured: bit-identical to the reference run with that rounded decay). In float32 that
  rounding is the dtype's own and Paddle's fused kernel is used; in float64 :class:`SpecAdamW`
  writes the decay in Paddle ops (hyper-parameters as tensors of the parameter's dtype, the
  reference's order) and then takes ``paddle.optimizer.Adam``'s step, the spec's Adam.

Plain SGD (momentum 0) is ``paddle.optimizer.SGD`` in float32 (no hyper-parameter but the
learning rate, which Paddle keeps in the parameter's dtype) and :class:`SpecMomentum` in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

from rosetta.backends.paddle.compat import paddle
from rosetta.spec.workload import SGD, Adam, AdamW


class _Scalars:
    """Hyper-parameters as 0-d tensors of a parameter's dtype, each rounded once and kept."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, float], paddle.Tensor] = {}

    def __call__(self, value: float, like: paddle.Tensor) -> paddle.Tensor:
        key = (str(like.dtype), value)
        if key not in self._held:
            self._held[key] = paddle.full([], value, dtype=like.dtype)
        return self._held[key]


def _adam(
    optimizer: Adam | AdamW,
    params: Sequence[paddle.Tensor],
    cls: type = paddle.optimizer.Adam,
    **extra: object,
) -> paddle.optimizer.Adam:
    """``cls`` (``paddle.optimizer.Adam`` or ``AdamW``, with its ``extra`` arguments) with the
    spec's Adam hyper-parameters: the spec's Adam rule."""
    return cls(
        learning_rate=optimizer.lr,
        beta1=optimizer.beta1,
        beta2=optimizer.beta2,
        epsilon=optimizer.eps,
        parameters=list(params),
        **extra,
    )


class SpecMomentum:
    """The spec's SGD with (Nesterov) momentum in Paddle ops, per parameter::

        buf = momentum * buf + g          (buf = g at the first step)
        w -= lr * buf                      (nesterov: w -= lr * (g + momentum * buf))

    The same ``step()`` / ``clear_grad()`` face as a ``paddle.optimizer`` optimiser."""

    def __init__(
        self, parameters: Sequence[paddle.Tensor], lr: float, momentum: float, nesterov: bool
    ) -> None:
        self.params = list(parameters)
        self.lr, self.momentum, self.nesterov = float(lr), float(momentum), bool(nesterov)
        self.buffers: dict[int, paddle.Tensor] = {}  # by position in ``params``
        self.scalar = _Scalars()

    @paddle.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient, in place."""
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            lr, mu = self.scalar(self.lr, p), self.scalar(self.momentum, p)
            if self.momentum == 0:
                p.set_value(p - lr * g)
                continue
            buf = self.buffers.get(i)
            buf = g.clone() if buf is None else mu * buf + g
            self.buffers[i] = buf
            update = g + mu * buf if self.nesterov else buf
            p.set_value(p - lr * update)

    def clear_grad(self, set_to_zero: bool = True) -> None:
        """Drop (or zero) every parameter's gradient, as ``paddle.optimizer`` does."""
        for p in self.params:
            p.clear_gradient(set_to_zero)


class SpecAdamW:
    """The spec's AdamW in float64: the decoupled decay in Paddle ops on the decayed tensors,
    then ``paddle.optimizer.Adam``'s step (the spec's Adam) on every tensor::

        w -= (lr * weight_decay) * w       (decayed tensors that have a gradient)
        w -= lr * m_hat / (sqrt(v_hat) + eps)

    The two lines commute (Adam's step does not read ``w``). The same ``step()`` /
    ``clear_grad()`` face as a ``paddle.optimizer`` optimiser."""

    def __init__(
        self,
        parameters: Sequence[paddle.Tensor],
        decays: Sequence[bool],
        optimizer: AdamW,
    ) -> None:
        self.params = list(parameters)
        self.decayed = [p for p, d in zip(self.params, decays, strict=True) if d]
        self.lr, self.weight_decay = float(optimizer.lr), float(optimizer.weight_decay)
        self.adam = _adam(optimizer, self.params)
        self.scalar = _Scalars()

    def _rate(self, p: paddle.Tensor) -> paddle.Tensor:
        """``lr * weight_decay`` in ``p``'s dtype (each rounded once, then multiplied, as the
        reference does)."""
        return self.scalar(self.lr, p) * self.scalar(self.weight_decay, p)

    @paddle.no_grad()
    def step(self) -> None:
        """The decay, then Adam's step, in place."""
        for p in self.decayed:
            if p.grad is not None:
                p.set_value(p - self._rate(p) * p)
        self.adam.step()

    def clear_grad(self, set_to_zero: bool = True) -> None:
        """Drop (or zero) every parameter's gradient, as ``paddle.optimizer`` does."""
        self.adam.clear_grad(set_to_zero)


Optimizer = paddle.optimizer.Optimizer | SpecMomentum | SpecAdamW


def make_optimizer(
    optimizer: object,
    params: Sequence[paddle.Tensor],
    dtype: str,
    names: Sequence[str] = (),
) -> Optimizer | None:
    """The spec's optimiser (``rosetta.spec.workload.SGD``/``Adam``/``AdamW``) over ``params``
    in ``dtype`` (canonical ``names`` in the same order: AdamW's decay set), or None for a
    forward-only workload (see the module docstring for which class and why)."""
    if isinstance(optimizer, AdamW):
        if len(names) != len(params):
            raise ValueError("AdamW needs the canonical name of every parameter (its decay set)")
        decays = [optimizer.decays(n) for n in names]
        if dtype != "float32":
            return SpecAdamW(params, decays, optimizer)
        decayed = frozenset(p.name for p, d in zip(params, decays, strict=True) if d)
        return _adam(
            optimizer,
            params,
            paddle.optimizer.AdamW,
            weight_decay=optimizer.weight_decay,
            apply_decay_param_fun=decayed.__contains__,  # Paddle passes the tensor's name
        )
    if isinstance(optimizer, Adam):
        return _adam(optimizer, params)
    if isinstance(optimizer, SGD):
        if dtype != "float32":
            return SpecMomentum(params, optimizer.lr, optimizer.momentum, optimizer.nesterov)
        if optimizer.momentum == 0:
            return paddle.optimizer.SGD(learning_rate=optimizer.lr, parameters=list(params))
        return paddle.optimizer.Momentum(
            learning_rate=optimizer.lr,
            momentum=optimizer.momentum,
            use_nesterov=optimizer.nesterov,
            parameters=list(params),
        )
    return None


def describe(opt: Optimizer | None) -> str:
    """The optimiser for the manifest: its class and how it relates to the spec's rule."""
    if opt is None:
        return "n/a (forward only, paddle.no_grad())"
    if isinstance(opt, SpecAdamW):
        return (
            "SpecAdamW: the spec's decay in Paddle ops, then paddle.optimizer.Adam (float64: "
            "paddle.optimizer.AdamW holds the decay as a float32 attribute)"
        )
    if isinstance(opt, SpecMomentum):
        return (
            "SpecMomentum: the spec's momentum rule in Paddle ops (float64: "
            "paddle.optimizer.Momentum holds the momentum as a float32 attribute)"
        )
    return f"paddle.optimizer.{type(opt).__name__}; the spec's rule, no deviation"
