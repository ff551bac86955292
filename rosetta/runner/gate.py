"""The equivalence gate: a backend must compute what the NumPy reference computes, before timing.

On a small fixed batch, with the canonical weights loaded in both, it compares the forward
outputs and, for training workloads, the loss and every gradient (dropout off), using the
tolerances the spec states for the dtype. A cell that fails is still timed, but its record says
``equivalent: false`` and every table shows it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rosetta.backends import numpy_ref
from rosetta.backends.base import Model, Params
from rosetta.spec.workload import Workload


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: overall verdict and the worst violation per compared quantity
    (violation = max |a - b| / bound; <= 1 is within tolerance)."""

    equivalent: bool
    dtype: str
    batch: int
    violations: tuple[tuple[str, float], ...]
    note: str = ""

    def as_dict(self) -> dict:
        """Plain-dict form for JSON records."""
        d = asdict(self)
        d["violations"] = dict(self.violations)
        return d


def run_gate(
    model: Model,
    workload: Workload,
    params: Params,
    x: np.ndarray,
    y: np.ndarray | None,
    dtype: str,
) -> GateResult:
    """Compare ``model`` with the reference on batch ``(x, y)`` under the spec's tolerances."""
    if model.backend == numpy_ref.NAME:
        return GateResult(True, dtype, len(x), (), note="the reference itself")
    tol = workload.tolerances[dtype]
    ref = numpy_ref.build(workload, params, dtype=dtype)
    found: list[tuple[str, float]] = [
        ("forward", tol.forward.violation(model.predict(x), ref.predict(x)))
    ]
    if workload.task == "train" and y is not None:
        loss, grads = model.loss_and_grads(x, y)
        ref_loss, ref_grads = ref.loss_and_grads(x, y)
        found.append(("loss", tol.loss.violation(np.float64(loss), np.float64(ref_loss))))
        worst = max(
            (tol.grads.violation(grads.get(k, np.full(1, np.nan)), g), k)
            for k, g in ref_grads.items()
        )
        found.append((f"grads (worst: {worst[1]})", worst[0]))
    ok = all(v <= 1.0 for _, v in found)
    return GateResult(ok, dtype, len(x), tuple(found))
