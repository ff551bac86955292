"""Where a backend leaves the reference: the first diverging op, found through the contract alone.

A gate failure says *that* a backend differs; this says *where*. It needs nothing from a backend
beyond ``build`` and its two faces, so it works for every backend, in-tree or not:

- **forward**, walking from the input: for each prefix of the graph (its first k top-level ops, a
  residual block counting as one) the backend's output is compared with the float64 reference's.
  The first prefix that leaves the forward tolerance names its last op: every op before it was
  checked on its own prefix.
- **gradients**, walking back from the loss: the graph is cut before each op that owns
  parameters; each *suffix* is fed the reference's own activation at the cut, and its parameter
  gradients are compared. The first suffix (from the loss) whose gradients leave tolerance names
  the segment between its cut and the previous one: the op that owns the parameters and the
  parameter-free ops behind it (a ReLU's or a max-pool's backward shows up there).

Every prefix is compared in the canonical layout, whatever the backend computes in: its
``predict_numpy`` returns canonical arrays (each backend's ``Model.output_to_canonical`` undoes
its own layout: NHWC images, an NHWC flatten's H, W, C rows, time-major sequences), so nothing
here knows a backend's layout, and a clean build reads within tolerance at every op
(``tests/conformance/test_localise.py``). A prefix is a workload of its own task, ``PROBE_TASK``:
forward-only, and a diagnostic cut rather than the timed program, so a backend that compiles
forward-only workloads (torch) builds it eagerly instead of compiling one graph per prefix.
Each probe builds one model per prefix or suffix, so this runs when the gate fails, not on every
cell; the drift of passing cells is shown per parameter (``drift_by_op``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from rosetta.spec.workload import InputSpec, Tolerance, Workload

Build = Callable[[Workload, dict, str], object]  # (workload, params, dtype) -> Model
#: the task of the localiser's prefix cuts: forward-only, never the timed program
PROBE_TASK = "probe"


@dataclass(frozen=True)
class OpError:
    """One probed op (or segment): its label and its violation of the tolerance (<= 1 passes)."""

    label: str
    violation: float

    def as_dict(self) -> dict:
        """Plain-dict form (strict JSON: inf becomes None)."""
        v = self.violation
        return {"op": self.label, "violation": float(v) if np.isfinite(v) else None}


def op_label(i: int, node: object) -> str:
    """``"3 conv2d conv2"``: index in the graph, op kind, and name where it has one."""
    kind = type(node).__name__.lower()
    name = getattr(node, "name", "")
    return f"{i} {kind}" + (f" {name}" if name else "")


def _params_of(nodes, in_shape, params: dict) -> dict:
    from rosetta.spec.graph import collect_params

    return {p.name: params[p.name] for p in collect_params(nodes, in_shape)}


def _shapes(workload: Workload) -> list[tuple]:
    shapes, shape = [], workload.input.shape
    for node in workload.graph:
        shapes.append(shape)
        shape = node.out_shape(shape)
    return shapes


def prefix(workload: Workload, k: int) -> Workload:
    """The first ``k`` top-level ops of ``workload`` as a forward-only probe (``PROBE_TASK``)."""
    return replace(workload, graph=workload.graph[:k], task=PROBE_TASK, loss=None, optimizer=None)


def distinct_cuts(workload: Workload) -> list[int]:
    """The prefix lengths whose last op is the first of its kind at its output shape, in graph
    order: a deep graph of repeated blocks (ResNet-50's 16 bottlenecks, 37 prefixes) probed at
    each kind of op in each layout and stage it meets (13 prefixes), since a prefix repeating an
    earlier one's last op at the same shape reads it through the same layout conversion."""
    seen: set[tuple[str, tuple]] = set()
    cuts, shape = [], workload.input.shape
    for k, node in enumerate(workload.graph, 1):
        shape = node.out_shape(shape)
        if (type(node).__name__, tuple(shape)) not in seen:
            seen.add((type(node).__name__, tuple(shape)))
            cuts.append(k)
    return cuts


def forward_probe(
    build: Build,
    workload: Workload,
    params: dict,
    x: np.ndarray,
    dtype: str,
    tol: Tolerance,
    cuts: list[int] | None = None,
) -> list[OpError]:
    """The forward violation of every prefix of the graph (or of the prefix lengths ``cuts``),
    in graph order (both sides in the canonical layout; a shape mismatch reads as inf)."""
    errors = []
    for k in cuts or range(1, len(workload.graph) + 1):
        v = _forward_violation(build, workload, prefix(workload, k), params, x, dtype, tol)
        errors.append(OpError(op_label(k - 1, workload.graph[k - 1]), np.nan_to_num(v, nan=np.inf)))
    return errors


def _forward_violation(build: Build, workload: Workload, cut: Workload, params: dict,
                       x: np.ndarray, dtype: str, tol: Tolerance) -> float:  # fmt: skip
    """The forward violation of the graph ``cut`` (made from ``workload``): the backend against
    the float64 reference, both fed ``x``."""
    from rosetta.backends import make, numpy_ref

    sub = _params_of(cut.graph, workload.input.shape, params)
    ref = make(numpy_ref, cut, sub, dtype="float64").predict_numpy(x)
    return tol.violation(build(cut, sub, dtype).predict_numpy(x), ref)


def block_probe(
    build: Build,
    workload: Workload,
    params: dict,
    x: np.ndarray,
    dtype: str,
    tol: Tolerance,
    k: int,
) -> list[OpError]:
    """Inside the residual block that is op ``k`` (0-based) of the graph: the forward violation
    of the ops before it followed by each prefix of its body (the body's own output, before the
    shortcut is added), labelled ``2 residual > attention block.0.attn``; [] for any other op.
    The model input still flows in whole, so an op reading the token ids (a padding mask) can
    be probed inside the block. A prefix a backend cannot build reads as not probed (nan)."""
    node = workload.graph[k]
    body = getattr(node, "body", None)
    if not body:
        return []
    errors = []
    for j in range(1, len(body) + 1):
        graph = (*workload.graph[:k], *body[:j])
        cut = replace(workload, graph=graph, task=PROBE_TASK, loss=None, optimizer=None)
        label = f"{op_label(k, node)} > {op_label(j - 1, body[j - 1]).split(' ', 1)[1]}"
        try:
            v = np.nan_to_num(_forward_violation(build, workload, cut, params, x, dtype, tol),
                              nan=np.inf)  # fmt: skip
        except Exception:  # noqa: BLE001 - a diagnosis: what cannot be probed is said so
            v = np.nan  # not probed (first_over skips it)
        errors.append(OpError(label, v))
    return errors


def gradient_probe(
    build: Build,
    workload: Workload,
    params: dict,
    x: np.ndarray,
    y: np.ndarray,
    dtype: str,
    tol: Tolerance,
) -> list[OpError]:
    """The gradient violation of every suffix that starts at an op owning parameters, walking
    back from the loss (the last such op first); each suffix starts from the reference's float64
    activation at its cut. A suffix a backend cannot be built for is recorded as not probed."""
    from rosetta.backends import make, numpy_ref

    shapes = _shapes(workload)
    cuts = [i for i, n in enumerate(workload.graph) if n.param_specs(shapes[i])]
    errors = []
    for j in range(len(cuts) - 1, -1, -1):
        start = cuts[j]
        end = cuts[j + 1] if j + 1 < len(cuts) else len(workload.graph)
        label = ", ".join(op_label(i, workload.graph[i]) for i in range(start, end))
        sub_w, xin = workload, x
        if start > 0:
            head = prefix(workload, start)
            head_params = _params_of(head.graph, workload.input.shape, params)
            xin = make(numpy_ref, head, head_params, dtype="float64").predict_numpy(x)
            xin = xin.astype(np.float32)  # what a loader takes; the suffix computes in `dtype`
            sub_w = replace(workload, graph=workload.graph[start:],
                            input=InputSpec(shapes[start], "float32"))  # fmt: skip
        sub = _params_of(sub_w.graph, sub_w.input.shape, params)
        try:
            _, ref = make(numpy_ref, sub_w, sub, dtype="float64").loss_and_grads(xin, y)
            _, got = build(sub_w, sub, dtype).loss_and_grads(xin, y)
        except Exception as exc:  # noqa: BLE001 - a loader that cannot take this activation
            errors.append(OpError(f"{label} (not probed: {type(exc).__name__})", float("nan")))
            continue
        worst = max((tol.violation(got.get(k), ref[k]) for k in ref), default=0.0)
        errors.append(OpError(label, float("inf") if np.isnan(worst) else worst))
    return errors


def param_op(workload: Workload, name: str) -> str:
    """The label of the top-level op that owns parameter ``name`` (``"6 conv2d conv3"``; a
    residual block's own op named after it: ``"4 residual (layer1.0.conv1)"``)."""
    from rosetta.spec.graph import collect_params

    owner = name.rsplit(".", 1)[0]
    shapes = _shapes(workload)
    for i, node in enumerate(workload.graph):
        if any(p.name == name for p in collect_params([node], shapes[i])):
            label = op_label(i, node)
            return label if getattr(node, "name", "") == owner else f"{label} ({owner})"
    return owner


def first_over(errors: list[OpError]) -> OpError | None:
    """The first probed op or segment out of tolerance (not-probed entries skipped)."""
    return next((e for e in errors if e.violation > 1.0), None)


def drift_by_op(workload: Workload, violations: dict[str, float]) -> list[OpError]:
    """Per parameterised op, the worst violation of its parameters (``{param name: v}``), in
    graph order: the small heat map that shows drift even when everything passes."""
    by_op: dict[str, float] = {}
    for p in workload.param_specs:
        if p.name in violations:
            op = p.name.rsplit(".", 1)[0]
            by_op[op] = max(by_op.get(op, 0.0), violations[p.name])
    return [OpError(op, v) for op, v in by_op.items()]
