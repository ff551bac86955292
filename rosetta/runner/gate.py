"""The equivalence gate: a backend must compute what the NumPy reference computes, before timing.

On a small fixed batch, with the canonical weights loaded in both, it compares (tolerances from
the spec, for the backend's dtype) against the reference *in float64*, the trusted answer:

- the forward outputs (evaluation mode);
- for training workloads, the loss and every gradient (dropout off), and the change of every
  parameter after ``k`` deterministic optimiser steps (dropout off), which is what checks the
  optimiser's momentum form and Adam's epsilon placement.

A failing comparison names the first diverging parameter in graph order and its error. A cell
that fails is still timed, but its record says ``equivalent: false`` and every table shows it.
The conformance suite (``tests/conformance``) asserts the same comparisons.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rosetta.backends import make, numpy_ref
from rosetta.backends.base import Model, Params
from rosetta.spec.workload import Tolerance, Workload

K_STEPS = 3  # optimiser steps compared by the gate


@dataclass(frozen=True)
class Check:
    """One compared quantity: its worst violation (max |a - b| / bound; <= 1 passes), where it
    was worst, and the first parameter in graph order that failed ('' if none)."""

    what: str  # "forward" | "loss" | "grads" | "params"
    violation: float
    worst: str = ""
    first_failure: str = ""

    @property
    def ok(self) -> bool:
        """Within tolerance (NaN is never within)."""
        return bool(self.violation <= 1.0)


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: the verdict and every check."""

    equivalent: bool
    dtype: str
    batch: int
    k_steps: int
    checks: tuple[Check, ...]
    note: str = ""

    @property
    def divergence(self) -> str:
        """One line naming the first failing check and parameter, or '' when equivalent."""
        for c in self.checks:
            if not c.ok:
                where = f" first at {c.first_failure}" if c.first_failure else ""
                return f"{c.what} diverge{where}: {c.violation:.3g}x the tolerance"
        return ""

    def as_dict(self) -> dict:
        """Plain-dict form for JSON records (violations keyed by check)."""
        d = asdict(self)
        d["checks"] = [asdict(c) for c in self.checks]
        d["violations"] = {c.what: _finite(c.violation) for c in self.checks}
        d["divergence"] = self.divergence
        return d


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None  # records are strict JSON


def compare_params(
    tol: Tolerance, what: str, actual: Params, desired: Params, order: list[str]
) -> Check:
    """Compare named arrays in ``order``: worst violation and first failing name."""
    worst, worst_name, first = 0.0, "", ""
    for name in order:
        a = actual.get(name)
        v = float("inf") if a is None else tol.violation(a, desired[name])
        v = float("inf") if np.isnan(v) else v
        if v > worst or not worst_name:
            worst, worst_name = v, name
        if not v <= 1.0 and not first:
            first = f"{name} ({v:.3g}x)"
    return Check(what, worst, worst_name, first)


def run_gate(
    model: Model,
    workload: Workload,
    params: Params,
    x: np.ndarray,
    y: np.ndarray | None,
    dtype: str,
    *,
    k: int = K_STEPS,
) -> GateResult:
    """Compare ``model`` (holding ``params``) with the float64 reference on batch ``(x, y)``.

    Leaves ``model`` changed by the ``k`` steps: callers ``set_params`` afterwards."""
    tol = workload.tolerances[dtype]
    ref = make(numpy_ref, workload, params, dtype="float64")
    if model.backend == numpy_ref.NAME and dtype == "float64":
        note = "the reference itself"
    else:
        note = f"against the float64 reference on {len(x)} samples"
    out = model.predict_numpy(x)
    checks = [Check("forward", _nan_inf(tol.forward.violation(out, ref.predict_numpy(x))))]
    if workload.task == "train" and y is not None:
        order = [p.name for p in workload.param_specs if p.trainable]
        loss, grads = model.loss_and_grads(x, y)
        ref_loss, ref_grads = ref.loss_and_grads(x, y)
        checks.append(Check("loss", _nan_inf(tol.loss.violation(np.float64(loss), ref_loss))))
        checks.append(compare_params(tol.grads, "grads", grads, ref_grads, order))
        p0 = {n: np.asarray(params[n], dtype=np.float64) for n in order}
        after = model.deterministic_steps(x, y, k)
        ref_after = ref.deterministic_steps(x, y, k)
        change = {n: np.asarray(after[n], dtype=np.float64) - p0[n] for n in order if n in after}
        ref_change = {n: ref_after[n] - p0[n] for n in order}
        checks.append(compare_params(tol.params, "params", change, ref_change, order))
    ok = all(c.ok for c in checks)
    return GateResult(ok, dtype, len(x), k if workload.task == "train" else 0, tuple(checks), note)


def _nan_inf(v: float) -> float:
    return float("inf") if np.isnan(v) else v
