"""The spec's optimisers as Chainer optimizers.

**SGD with momentum**: Chainer's own ``MomentumSGD``, unchanged. It updates
``v = momentum * v - lr * g; w += v``; the spec's (PyTorch) form is ``buf = momentum * buf + g;
w -= lr * buf``. With a constant ``lr``, ``v = -lr * buf`` at every step, so the two are the same
rule and differ only in rounding (``tests/test_backend_chainer.py`` checks it in float64).

**Adam**: Chainer's ``Adam`` is *not* the spec's rule. It computes
``w -= alpha_t * m / (sqrt(v) + eps)`` with ``alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)``,
i.e. epsilon outside the bias correction (equal to the spec's rule with ``eps`` replaced by
``eps * sqrt(1 - beta2^t)``), or ``sqrt(v + eps)`` with ``eps_inside_sqrt``. The spec is Kingma
& Ba's Algorithm 1, ``w -= lr * m_hat / (sqrt(v_hat) + eps)``. ``SpecAdam`` is Chainer's
``Adam`` with its update rule replaced by Algorithm 1, written in the same order of operations
as the NumPy reference (``rosetta/backends/numpy_ref/optim.py``); on a GPU it is one CuPy
elementwise kernel. The step count ``t`` is per parameter (Chainer's ``UpdateRule.t``), as in
the reference.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.chainer import compat
from rosetta.errors import BackendError
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

chainer = compat.load()
from chainer.optimizers import adam as _chainer_adam  # noqa: E402  (after the compat layer)


class SpecAdamRule(_chainer_adam.AdamRule):
    """Adam's update, Algorithm 1 (bias-corrected moments, epsilon outside the square root)."""

    _kernel = None

    def update_core_cpu(self, param) -> None:
        g = param.grad
        if g is None:
            return
        hp = self.hyperparam
        p = param.data
        dt = p.dtype.type
        t = self.t  # already incremented by UpdateRule.update
        m, v = self.state["m"], self.state["v"]
        decay = getattr(hp, "decoupled_decay", 0.0)  # AdamW's, on the spec's decay set
        if decay:
            p -= dt(hp.alpha) * dt(decay) * p
        m *= dt(hp.beta1)
        m += dt(1 - hp.beta1) * g
        v *= dt(hp.beta2)
        v += dt(1 - hp.beta2) * (g * g)
        m_hat = m / dt(1 - hp.beta1**t)
        v_hat = v / dt(1 - hp.beta2**t)
        p -= dt(hp.alpha) * m_hat / (np.sqrt(v_hat) + dt(hp.eps))

    def update_core_gpu(self, param) -> None:
        g = param.grad
        if g is None:
            return
        from chainer.backends import cuda

        if getattr(self.hyperparam, "decoupled_decay", 0.0):
            raise BackendError("backend 'chainer': AdamW's decay runs on the CPU only")

        if SpecAdamRule._kernel is None:
            SpecAdamRule._kernel = cuda.elementwise(
                "T grad, T lr, T beta1, T one_minus_beta1, T beta2, T one_minus_beta2, "
                "T bc1, T bc2, T eps",
                "T param, T m, T v",
                """m = beta1 * m + one_minus_beta1 * grad;
                   v = beta2 * v + one_minus_beta2 * grad * grad;
                   param -= lr * (m / bc1) / (sqrt(v / bc2) + eps);""",
                "rosetta_spec_adam",
            )
        hp = self.hyperparam
        t = self.t
        dt = param.data.dtype.type
        SpecAdamRule._kernel(
            g,
            dt(hp.alpha),
            dt(hp.beta1),
            dt(1 - hp.beta1),
            dt(hp.beta2),
            dt(1 - hp.beta2),
            dt(1 - hp.beta1**t),
            dt(1 - hp.beta2**t),
            dt(hp.eps),
            param.data,
            self.state["m"],
            self.state["v"],
        )


class SpecAdam(chainer.optimizers.Adam):
    """``chainer.optimizers.Adam`` with the spec's update rule (see the module docstring)."""

    def create_update_rule(self):
        return SpecAdamRule(self.hyperparam)


def make_optimizer(workload: Workload):
    """The workload's optimiser as a Chainer optimizer (not yet set up on a link), or None."""
    o = workload.optimizer
    if isinstance(o, SGD):
        if o.nesterov:
            raise BackendError("backend 'chainer' lowers SGD with plain momentum, not Nesterov")
        if o.momentum == 0:
            return chainer.optimizers.SGD(lr=o.lr)
        return chainer.optimizers.MomentumSGD(lr=o.lr, momentum=o.momentum)
    if isinstance(o, Adam | AdamW):
        return SpecAdam(alpha=o.lr, beta1=o.beta1, beta2=o.beta2, eps=o.eps)
    return None


def set_decay(optimizer, workload: Workload, owners) -> None:
    """AdamW: the decoupled decay on the parameters of the spec's decay set (after
    ``optimizer.setup``: each parameter's own update rule), none elsewhere."""
    from rosetta.backends.chainer.weights import attribute, decay_paths

    o = workload.optimizer
    if not isinstance(o, AdamW):
        return
    for op, link in owners:
        for name, path in decay_paths(op).items():
            if o.decays(name):
                attribute(link, path).update_rule.hyperparam.decoupled_decay = o.weight_decay


def describe(workload: Workload) -> str:
    """One line for the manifest: which optimizer runs and how it departs from Chainer's."""
    o = workload.optimizer
    if isinstance(o, SGD):
        return (
            "chainer.optimizers.MomentumSGD (v = m*v - lr*g; w += v: the spec's rule at "
            "constant lr)"
            if o.momentum
            else "chainer.optimizers.SGD"
        )
    if isinstance(o, AdamW):
        return (
            "rosetta SpecAdam with AdamW's decoupled decay (w -= lr*wd*w, then Algorithm 1) on "
            "the spec's decay set"
        )
    if isinstance(o, Adam):
        return (
            "rosetta SpecAdam: chainer.optimizers.Adam with its update rule replaced by Kingma & "
            "Ba Algorithm 1 (eps added to sqrt(v_hat); Chainer's own adds it to sqrt(v))"
        )
    return "n/a (forward only)"
