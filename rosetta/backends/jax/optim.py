"""The spec's optimisers as optax transformations, and why each is the spec's rule as it stands.

- SGD: ``optax.sgd(lr, momentum, nesterov)`` is ``trace(decay=momentum)`` then ``scale(-lr)``:
  ``buf = momentum * buf + g`` (``buf`` starts at 0, so the first step has ``buf = g``) and
  ``w -= lr * buf``; with ``nesterov=True`` the update is ``g + momentum * buf``. That is the
  spec's PyTorch form exactly (``rosetta.backends.numpy_ref.optim.SGD``): no deviation.
- Adam: ``optax.adam(lr, b1, b2, eps, eps_root=0)`` is Kingma & Ba's Algorithm 1 with ``eps``
  outside the square root of the bias-corrected ``v_hat``:
  ``w -= lr * m_hat / (sqrt(v_hat) + eps)``, the spec's rule (``numpy_ref.optim.Adam``): no
  deviation. (Keras' and Chainer's placement, ``eps * sqrt(1 - beta2**t)``, would differ.)

``tests/test_backend_jax.py`` checks both against ``numpy_ref.optim`` in float64, step by step.
The state lives in the parameters' dtype (optax's default), so float32 parameters are updated in
float32 as every framework does.
"""

from __future__ import annotations

import optax

from rosetta.errors import BackendError
from rosetta.spec.workload import SGD, Adam, AdamW, Workload


def make_optimizer(workload: Workload) -> tuple[optax.GradientTransformation, str]:
    """The optax transformation of ``workload.optimizer`` and a one-line description."""
    o = workload.optimizer
    if isinstance(o, SGD):
        tx = optax.sgd(o.lr, momentum=o.momentum or None, nesterov=o.nesterov)
        return tx, (
            f"optax.sgd(lr={o.lr}, momentum={o.momentum}, nesterov={o.nesterov}): trace form "
            "buf = m*buf + g, w -= lr*buf, the spec's (PyTorch) form, no deviation"
        )
    if isinstance(o, Adam):
        tx = optax.adam(o.lr, b1=o.beta1, b2=o.beta2, eps=o.eps, eps_root=0.0)
        return tx, (
            f"optax.adam(lr={o.lr}, b1={o.beta1}, b2={o.beta2}, eps={o.eps}, eps_root=0): "
            "Algorithm 1, eps outside sqrt(v_hat), the spec's form, no deviation"
        )
    if isinstance(o, AdamW):
        tx = optax.adamw(
            o.lr,
            b1=o.beta1,
            b2=o.beta2,
            eps=o.eps,
            eps_root=0.0,
            weight_decay=o.weight_decay,
            mask=lambda params: {name: o.decays(name) for name in params},
        )
        return tx, (
            f"optax.adamw(lr={o.lr}, b1={o.beta1}, b2={o.beta2}, eps={o.eps}, eps_root=0, "
            f"weight_decay={o.weight_decay}, mask: roles {list(o.decay)}): decoupled decay, "
            "the spec's form, no deviation"
        )
    if o is None:
        return optax.identity(), "none (forward-only workload)"
    raise BackendError(f"backend 'jax' cannot lower optimizer {type(o).__name__}")
