"""The spec's optimisers as ``torch.optim``: no deviation from the rules the spec states.

- SGD: ``torch.optim.SGD`` is the spec's form itself (``buf = momentum * buf + g; w -= lr *
  buf``, Nesterov as PyTorch writes it);
- Adam: ``torch.optim.Adam`` is Kingma & Ba's Algorithm 1, ``lr * m_hat / (sqrt(v_hat) + eps)``,
  the spec's epsilon placement (checked in float64 against ``numpy_ref.optim`` by
  ``tests/test_backend_torch.py``).

``foreach`` follows PyTorch's own default: the multi-tensor kernels on CUDA, the per-parameter
loop on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rosetta.spec.workload import SGD, Adam, AdamW


def make_optimizer(
    optimizer: object,
    params: Sequence[torch.Tensor],
    device: str,
    names: Sequence[str] = (),
) -> torch.optim.Optimizer | None:
    """The spec's optimiser (``rosetta.spec.workload.SGD``/``Adam``/``AdamW``) over ``params``
    (canonical ``names`` in the same order: AdamW's decay set), or None for a forward-only
    workload. AdamW is ``torch.optim.AdamW`` with two groups, decayed and not."""
    foreach = device == "cuda"
    if isinstance(optimizer, AdamW):
        if len(names) != len(params):
            raise ValueError("AdamW needs the canonical name of every parameter (its decay set)")
        decayed = [p for n, p in zip(names, params, strict=True) if optimizer.decays(n)]
        plain = [p for n, p in zip(names, params, strict=True) if not optimizer.decays(n)]
        groups = [
            {"params": decayed, "weight_decay": optimizer.weight_decay},
            {"params": plain, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(
            [g for g in groups if g["params"]],
            lr=optimizer.lr,
            betas=(optimizer.beta1, optimizer.beta2),
            eps=optimizer.eps,
            foreach=foreach,
        )
    if isinstance(optimizer, SGD):
        return torch.optim.SGD(
            params,
            lr=optimizer.lr,
            momentum=optimizer.momentum,
            nesterov=optimizer.nesterov,
            foreach=foreach,
        )
    if isinstance(optimizer, Adam):
        return torch.optim.Adam(
            params,
            lr=optimizer.lr,
            betas=(optimizer.beta1, optimizer.beta2),
            eps=optimizer.eps,
            foreach=foreach,
        )
    return None


def describe(opt: torch.optim.Optimizer | None) -> str:
    """The optimiser for the manifest: class, its kernel flags, and that it is the spec's rule."""
    if opt is None:
        return "n/a (forward only, torch.inference_mode())"
    flags = {k: opt.defaults.get(k) for k in ("foreach", "fused", "nesterov") if k in opt.defaults}
    return f"torch.optim.{type(opt).__name__} {flags}; the spec's rule, no deviation"
