"""The spec's optimisers as the ``updates`` of the compiled training step (Theano's idiom).

PyTensor has no optimiser library: a step is ``pytensor.function(..., updates=[(shared,
new_value), ...])``, every new value a symbolic expression of the gradients, so the rule is
written here as the spec states it, and the compiled function applies it in place after
computing the loss:

- SGD (PyTorch's form, the spec's): ``buf = momentum * buf + g``; ``w -= lr * buf`` (Nesterov:
  ``w -= lr * (g + momentum * buf)``); ``buf`` starts at 0, so the first step has ``buf = g``;
- Adam (Kingma & Ba, Algorithm 1, the spec's): ``t += 1``; ``m = b1*m + (1-b1)*g``;
  ``v = b2*v + (1-b2)*g**2``; ``w -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)``,
  epsilon outside the square root of the bias-corrected ``v_hat``;
- AdamW (decoupled decay, the spec's): Adam's step with ``w`` first decayed, ``w - lr * wd * w``,
  on the parameters whose role the spec's ``decay`` lists (``AdamW.decays`` of the shared
  variable's name, the canonical one); the moments never see the decay.

Every hyper-parameter is a constant of the parameters' dtype, so float32 parameters are updated
in float32 arithmetic. The state is ``shared`` variables zeroed by :meth:`State.reset` (which
``set_params`` calls). Checked in float64 against ``numpy_ref.optim`` by the gate's k steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rosetta.errors import BackendError
from rosetta.spec.workload import SGD, Adam, AdamW


@dataclass(frozen=True)
class State:
    """The optimiser's shared variables (momentum buffers, or Adam's moments and step)."""

    shared: tuple  # every state variable, zeroed by reset

    def reset(self) -> None:
        """Zero every state variable (fresh training)."""
        for s in self.shared:
            s.set_value(np.zeros_like(s.get_value(borrow=True)))


def updates(optimizer: object, params: list, grads: list, dtype: str) -> tuple[list, State, str]:
    """The update pairs of ``optimizer`` (the spec's ``SGD``/``Adam``/``AdamW``) for ``params``
    (shared variables named by their canonical names) with their symbolic ``grads``, the state
    they keep, and a one-line description."""
    import pytensor
    import pytensor.tensor as pt

    def const(v: float):
        return pt.constant(np.asarray(v, dtype=dtype))

    def zeros_like(p):
        return pytensor.shared(np.zeros_like(p.get_value(borrow=True)), name=f"{p.name}.state")

    out: list = []
    if isinstance(optimizer, SGD):
        lr, mu = const(optimizer.lr), const(optimizer.momentum)
        bufs = []
        for p, g in zip(params, grads, strict=True):
            if optimizer.momentum == 0:
                out.append((p, p - lr * g))
                continue
            buf = zeros_like(p)
            bufs.append(buf)
            new_buf = mu * buf + g
            step = g + mu * new_buf if optimizer.nesterov else new_buf
            out += [(buf, new_buf), (p, p - lr * step)]
        desc = (
            f"updates of the compiled step: SGD lr={optimizer.lr}, momentum={optimizer.momentum}, "
            f"nesterov={optimizer.nesterov} (buf = m*buf + g; w -= lr*buf), the spec's form"
        )
        return out, State(tuple(bufs)), desc
    if isinstance(optimizer, Adam | AdamW):
        lr, b1, b2, eps = (const(v) for v in (optimizer.lr, optimizer.beta1, optimizer.beta2,
                                              optimizer.eps))  # fmt: skip
        adamw = isinstance(optimizer, AdamW)
        wd = const(optimizer.weight_decay) if adamw else None
        one = const(1.0)
        t = pytensor.shared(np.asarray(0.0, dtype=dtype), name="adam.t")
        t1 = t + one
        state = [t]
        out.append((t, t1))
        for p, g in zip(params, grads, strict=True):
            m, v = zeros_like(p), zeros_like(p)
            state += [m, v]
            m1 = b1 * m + (one - b1) * g
            v1 = b2 * v + (one - b2) * g * g
            m_hat = m1 / (one - b1**t1)
            v_hat = v1 / (one - b2**t1)
            w = p - lr * wd * p if adamw and optimizer.decays(p.name) else p  # decoupled decay
            out += [(m, m1), (v, v1), (p, w - lr * m_hat / (pt.sqrt(v_hat) + eps))]
        if adamw:
            desc = (
                f"updates of the compiled step: AdamW lr={optimizer.lr}, b1={optimizer.beta1}, "
                f"b2={optimizer.beta2}, eps={optimizer.eps}, weight_decay="
                f"{optimizer.weight_decay} on the roles {list(optimizer.decay)} (w -= lr*wd*w, "
                "then Algorithm 1: the spec's form), written out: PyTensor has no optimiser "
                "library"
            )
            return out, State(tuple(state)), desc
        desc = (
            f"updates of the compiled step: Adam lr={optimizer.lr}, b1={optimizer.beta1}, "
            f"b2={optimizer.beta2}, eps={optimizer.eps}, eps outside sqrt(v_hat) (Algorithm 1, "
            "the spec's form), written out: PyTensor has no optimiser library"
        )
        return out, State(tuple(state)), desc
    if optimizer is None:
        return [], State(()), "n/a (forward only)"
    raise BackendError(f"backend 'pytensor' cannot lower optimizer {type(optimizer).__name__}")
