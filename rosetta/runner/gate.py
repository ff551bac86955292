"""The equivalence gate: a backend must compute what the NumPy reference computes, before timing.

On a small fixed batch, with the canonical weights loaded in both, it compares (tolerances from
the spec, for the dtype) against the reference *in float64*, the trusted answer:

- the forward outputs (evaluation mode);
- for training workloads: the loss and the change of every parameter after ``k`` optimiser steps
  run through **the timed program itself** (``Model.gated_steps``: ``train_step`` fed by the
  native loader, with dropout switched off inside that same program), and every gradient;
- for training workloads, when the timed dtype is not float64 and a ``build`` is given, the same
  checks again on the same backend built in **float64**: optimiser deviations (epsilon placement,
  weight decay, a wrong momentum) move the k-step change by ~1e-7 relative, invisible at float32's
  bounds and 1e7x over float64's.

When a check fails, ``rosetta.runner.localise`` names the place: the first diverging op walking
forward from the input, or the first diverging segment walking back from the loss, or the
optimiser when forward and gradients agree but the k-step change does not. The per-parameter
violations of passing cells are kept too (``drift``), so drift shows before it fails. A cell that
fails is still timed, but its record says ``equivalent: false`` and every table shows it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from rosetta.backends import make, numpy_ref
from rosetta.backends.base import Model, Params
from rosetta.runner import localise
from rosetta.spec.workload import Tolerance, Workload

K_STEPS = 3  # optimiser steps compared by the gate


@dataclass(frozen=True)
class Check:
    """One compared quantity: its worst violation (max |a - b| / bound; <= 1 passes), where it
    was worst, and the first failing parameter: walking back from the loss for gradients (a
    backward error starts nearest the loss), the worst one for the k-step change (which mixes
    every step's gradients: no order there tells a cause). ``misloaded`` names the parameters
    whose values, read back before any step, differ from the canonical weights loaded: a
    ``set_params``/``get_params`` fault, which the k-step change (measured from the canonical
    weights) shows as if the optimiser had moved them."""

    what: str  # "forward" | "loss" | "grads" | "params", "... (float64)" for the float64 gate
    violation: float
    worst: str = ""
    first_failure: str = ""
    per_param: dict = field(default_factory=dict, compare=False)
    misloaded: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Within tolerance (NaN is never within)."""
        return bool(self.violation <= 1.0)


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: the verdict, every check, and where a failure was localised."""

    equivalent: bool
    dtype: str
    batch: int
    k_steps: int
    checks: tuple[Check, ...]
    note: str = ""
    where: str = ""  # the named place of the first failure ("" when equivalent)
    probe: tuple[localise.OpError, ...] = ()  # the localisation probe's per-op violations
    drift: tuple[localise.OpError, ...] = ()  # per parameterised op, worst gradient violation
    reused_from: str = ""  # the cell key whose gate this verdict is ("" = gated in this cell)

    @property
    def divergence(self) -> str:
        """One line naming the first failing check, its place (the localised op, or the first
        failing tensor), and that check's worst tensor where it is another one; '' when
        equivalent. ``where`` says why the place and the worst tensor differ, where they do."""
        for c in sorted(self.checks, key=_check_rank):  # the first failure in causal order
            if not c.ok:
                at, _, why = self.where.partition("; ")  # the place; what reconciles the rest
                at = at or (f"first at {c.first_failure}" if c.first_failure else "")
                line = f"{c.what} diverge{' ' + at if at else ''}: {c.violation:.3g}x the tolerance"
                first = c.first_failure.split(" (")[0]
                if c.worst and c.worst != first and (self.where or first):
                    line += f" (worst {c.worst})"
                return line + (f"; {why}" if why else "")
        return ""

    @classmethod
    def from_dict(cls, d: dict, reused_from: str) -> GateResult:
        """The verdict of another cell's record (``as_dict`` form), reused under its key: the
        checks keep their violations (``None`` in JSON is the infinite one), per-parameter
        violations stay in that record."""

        def v(x) -> float:
            return float("inf") if x is None else float(x)

        checks = tuple(
            Check(
                c["what"],
                v(c["violation"]),
                c.get("worst", ""),
                c.get("first_failure", ""),
                misloaded=tuple(c.get("misloaded", ())),
            )  # fmt: skip
            for c in d["checks"]
        )
        ops = {
            k: tuple(localise.OpError(e["op"], v(e["violation"])) for e in d.get(k, ()))
            for k in ("probe", "drift")
        }
        return cls(
            bool(d["equivalent"]), d["dtype"], int(d["batch"]), int(d["k_steps"]), checks,
            d.get("note", ""), d.get("where", ""), ops["probe"], ops["drift"], reused_from,
        )  # fmt: skip

    def as_dict(self) -> dict:
        """Plain-dict form for JSON records (violations keyed by check)."""
        d = asdict(self)
        d["checks"] = [
            {k: v for k, v in asdict(c).items() if k != "per_param"}
            | {"violation": _finite(c.violation)}
            for c in self.checks
        ]
        d["violations"] = {c.what: _finite(c.violation) for c in self.checks}
        d["divergence"] = self.divergence
        d["probe"] = [e.as_dict() for e in self.probe]
        d["drift"] = [e.as_dict() for e in self.drift]
        return d


def _check_rank(c: Check) -> tuple[int, int]:
    """Causal order of checks: forward before loss before gradients before parameters (a wrong
    forward explains everything after it), the timed dtype before the float64 gate."""
    kinds = ("forward", "loss", "grads", "params")
    kind = c.what.split(" ")[0]
    return (kinds.index(kind) if kind in kinds else len(kinds), c.what.endswith("(float64)"))


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None  # records are strict JSON


def _nan_inf(v: float) -> float:
    return float("inf") if np.isnan(v) else v


def compare_params(
    tol: Tolerance,
    what: str,
    actual: Params,
    desired: Params,
    order: list[str] | None,
    misloaded: tuple[str, ...] = (),
) -> Check:
    """Compare named arrays: worst violation, first failing name (in ``order``; ``None``: the
    worst failing one), every violation."""
    worst, worst_name, first, each = 0.0, "", "", {}
    for name in order if order is not None else list(desired):
        a = actual.get(name)
        v = float("inf") if a is None else _nan_inf(tol.violation(a, desired[name]))
        each[name] = v
        if v > worst or not worst_name:
            worst, worst_name = v, name
        if not v <= 1.0 and not first and order is not None:
            first = f"{name} ({v:.3g}x)"
    if order is None and not worst <= 1.0:
        first = f"{worst_name} ({worst:.3g}x)"
    return Check(what, worst, worst_name, first, each, misloaded)


def _checks(
    model: Model, workload: Workload, params: Params, x, y, dtype: str, k: int, ref, suffix: str
) -> list[Check]:
    """forward, loss, grads and params of ``model`` against the float64 reference ``ref``."""
    tol = workload.tolerances[dtype]
    checks = [
        Check("forward" + suffix, _nan_inf(tol.forward.violation(model.predict_numpy(x), ref.out)))
    ]
    if workload.task != "train" or y is None:
        return checks
    order = [p.name for p in workload.param_specs if p.trainable]
    p0 = {n: np.asarray(params[n], dtype=np.float64) for n in order}
    # what the model holds before any step: a round trip is exact (the contract), so any
    # difference is a loading fault, not something an optimiser did
    start = model.get_params()
    misloaded = tuple(
        n for n in order if not np.array_equal(np.asarray(start.get(n), dtype=np.float64), p0[n])
    )
    _, grads = model.loss_and_grads(x, y)
    losses, after = model.gated_steps(x, y, k)  # the timed program, dropout off inside it
    checks.append(
        Check("loss" + suffix, _nan_inf(tol.loss.violation(np.float64(losses[0]), ref.loss)))
    )
    # walking back from the loss: the first failing gradient named is the one nearest the loss
    checks.append(compare_params(tol.grads, "grads" + suffix, grads, ref.grads, order[::-1]))
    change = {n: np.asarray(after[n], dtype=np.float64) - p0[n] for n in order if n in after}
    ordered = {n: ref.change[n] for n in order}
    checks.append(compare_params(tol.params, "params" + suffix, change, ordered, None, misloaded))
    return checks


@dataclass(frozen=True)
class _Reference:
    out: np.ndarray
    loss: float | None = None
    grads: Params | None = None
    change: Params | None = None


def reference(workload: Workload, params: Params, x, y, k: int) -> _Reference:
    """What the float64 reference computes on the gate's batch (computed once per gate)."""
    ref = make(numpy_ref, workload, params, dtype="float64")
    out = ref.predict_numpy(x)
    if workload.task != "train" or y is None:
        return _Reference(out)
    loss, grads = ref.loss_and_grads(x, y)
    order = [p.name for p in workload.param_specs if p.trainable]
    p0 = {n: np.asarray(params[n], dtype=np.float64) for n in order}
    after = ref.deterministic_steps(x, y, k)
    return _Reference(out, loss, grads, {n: after[n] - p0[n] for n in order})


def run_gate(
    model: Model,
    workload: Workload,
    params: Params,
    x: np.ndarray,
    y: np.ndarray | None,
    dtype: str,
    *,
    k: int = K_STEPS,
    build=None,
) -> GateResult:
    """Compare ``model`` (holding ``params``) with the float64 reference on batch ``(x, y)``.

    ``build(workload, params, dtype) -> Model`` builds the same backend again: for the float64
    gate of training cells and for localising a failure (without it, neither runs). Leaves
    ``model`` changed by the ``k`` steps: callers ``set_params`` afterwards."""
    ref = reference(workload, params, x, y, k)
    checks = _checks(model, workload, params, x, y, dtype, k, ref, "")
    notes = [f"against the float64 reference on {len(x)} samples; steps through the timed program"]
    train = workload.task == "train" and y is not None
    if train and build is not None and dtype != "float64":
        try:
            m64 = build(workload, params, "float64")
        except Exception as exc:  # noqa: BLE001 - a backend without float64 says so
            notes.append(f"float64 gate not run: {type(exc).__name__}: {exc}")
        else:
            checks += _checks(m64, workload, params, x, y, "float64", k, ref, " (float64)")
            notes.append(
                "optimiser and gradients also checked in float64"
                + (f" (precision fp32: {dtype} has no float64 form)" if dtype == "bf16" else "")
            )
    ok = all(c.ok for c in checks)
    where, probe = "", ()
    if not ok and build is not None:
        where, probe = _localise(build, workload, params, x, y, checks, dtype)
    grads = next((c for c in checks if c.what == "grads"), None)
    drift = tuple(localise.drift_by_op(workload, grads.per_param)) if grads else ()
    return GateResult(
        ok, dtype, len(x), k if train else 0, tuple(checks), "; ".join(notes), where, probe, drift
    )


def _localise(build, workload, params, x, y, checks, gate_dtype: str) -> tuple[str, tuple]:
    """Name the place of the first failing check (see ``rosetta.runner.localise``), in words
    that agree with the checks' worst tensors or say why they differ."""
    failed = next(c for c in sorted(checks, key=_check_rank) if not c.ok)
    dtype = "float64" if failed.what.endswith("(float64)") else gate_dtype
    kind = failed.what.split(" ")[0]
    tol = workload.tolerances[dtype]
    fwd_ok = all(c.ok for c in checks if c.what.split(" ")[0] == "forward")
    grads_ok = all(c.ok for c in checks if c.what.split(" ")[0] in ("grads", "loss"))
    misloaded = list(dict.fromkeys(n for c in checks for n in c.misloaded))
    loaded = ""
    if misloaded:
        ops_ = ", ".join(dict.fromkeys(localise.param_op(workload, n) for n in misloaded))
        loaded = (
            f"{', '.join(misloaded)} (op {ops_}) read back before any step differ from the "
            "canonical weights loaded: a loading fault (set_params/get_params)"
        )
    at_loaded = f"at op {localise.param_op(workload, misloaded[0])}" if misloaded else ""
    try:
        if not fwd_ok:
            errors = localise.forward_probe(build, workload, params, x, dtype, tol.forward)
            hit = localise.first_over(errors)
            if hit and hit.label.split(" ")[0].isdigit():  # a residual block: open it
                inner = localise.block_probe(build, workload, params, x, dtype, tol.forward,
                                             int(hit.label.split(" ")[0]))  # fmt: skip
                errors += inner
                hit = localise.first_over(inner) or hit
            where = f"first at op {hit.label} (forward, {dtype})" if hit else at_loaded
            return _joined(where, loaded), tuple(errors)
        if not grads_ok and y is not None:
            errors = localise.gradient_probe(build, workload, params, x, y, dtype, tol.grads)
            hit = localise.first_over(errors)
            where = f"first at {hit.label} (walking back from the loss, {dtype})" if hit else ""
            grads = next(
                (c for c in sorted(checks, key=_check_rank) if not c.ok and c.what[:5] == "grads"),
                None,
            )
            aside = _worst_aside(workload, grads.worst, hit.label) if hit and grads else ""
            return _joined(where or at_loaded, aside, loaded), tuple(errors)
    except Exception as exc:  # noqa: BLE001 - localisation is a diagnosis, never a crash
        return _joined(f"(localisation failed: {type(exc).__name__}: {exc})", loaded), ()
    if kind == "params" and misloaded:
        return _joined(f"{at_loaded}, not the optimiser", loaded), ()
    if kind == "params":
        # the first failing tensor, in spec order (its factor dropped), and the op owning it
        name = (failed.first_failure or failed.worst).split(" (")[0]
        at = f", first at {name} (op {localise.param_op(workload, name)})" if name else ""
        return (
            f"in the optimiser: forward and gradients agree, the {K_STEPS}-step change does "
            f"not{at}",
            (),
        )
    return loaded, ()


def _worst_aside(workload: Workload, worst: str, segment: str) -> str:
    """Why the gradient check's worst tensor lies outside the segment the probe named ('' when
    it lies inside): further back, an error grows as it flows back from the loss; nearer the
    loss, the difference comes with the activations reaching it (its own segment, fed the
    reference's activation, reads within tolerance)."""
    op = localise.param_op(workload, worst).split(" (")[0] if worst else ""
    if not op[:1].isdigit() or not segment[:1].isdigit() or op in segment.split(", "):
        return ""
    if int(op.split()[0]) < int(segment.split()[0]):
        return f"the worst gradient, {worst}, lies further back: the error grows as it flows back"
    return (
        f"the worst gradient, {worst}, lies nearer the loss: fed the reference's activation its "
        "own segment is within tolerance, so it comes with the activations reaching it"
    )


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
