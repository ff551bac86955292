"""Conformance by op: every op of the spec, in the tiny graphs its ``PROBES`` declare
(``rosetta.spec.probes``), on every backend, against the float64 reference: forward, loss, every
gradient and the parameters after the probe's SGD steps (dropout off). No workload YAML needed:
an op is checked everywhere from the moment it is registered.

Each backend runs the probes in float64 where it computes in float64 (the strict comparison of
conventions: only summation order differs), else in float32 (the serving engines); the reference
runs them in float32 (its float64 self is the trusted answer, checked against finite differences
in tests/test_numpy_ref_ops.py). The tolerances are the probes' own, stated in
``rosetta.spec.probes.TOLERANCES``.

A gap fails: an op that a backend neither lowers (``ops/<op>.py``) nor declares in its
``UNSUPPORTED`` fails :func:`test_every_op_is_lowered_or_declared`; a declared one is a skip with
the backend's reason here, as it is a skipped record in a bench run.
"""

from __future__ import annotations

import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, ops
from rosetta.spec.probes import probe_batch, probe_workload, probe_workloads
from tests.conformance.conftest import backend_params, gate_labels, trains, usable_backend

PROBES = [pytest.param((op, i), id=f"{op}-{i}") for op, i, _ in probe_workloads()]


def _table(name: str):
    return backends.source_module(name).OPS


@pytest.mark.parametrize(
    "name",
    [p.values[0] for p in backend_params(backends.names()) if backends.has_op_table(p.values[0])],
)
def test_every_op_is_lowered_or_declared(name):
    """Framework-free: read from the backend's op modules and its ``UNSUPPORTED`` alone."""
    table = _table(name)
    gaps, folder = table.gaps(), table.package.replace(".", "/")
    assert not gaps, (
        f"backend {name!r} neither lowers nor declares unsupported: {', '.join(gaps)} (write "
        f"{folder}/<op>.py, or list the op in {folder}/__init__.py UNSUPPORTED with the reason)"
    )


def test_every_op_has_a_probe():
    bare = [name for name, cls in ops.OPS.items() if name != "residual" and not cls.PROBES]
    assert not bare, f"ops without a conformance probe (register(..., probes=...)): {bare}"


def _gate(backend, op: str, index: int):
    """The probe's gate on ``backend``: its model in the probe's dtype, the probe's batch."""
    w = probe_workload(op, index)
    dtype = "float64" if "float64" in backend.DTYPES and backend.NAME != "numpy_ref" else "float32"
    params = canonical_weights(w, 0)
    model = make(backend, w, params, dtype=dtype)
    x, y = probe_batch(w)
    return w, dtype, run_gate(model, w, params, x, gate_labels(backend, y), dtype)


@pytest.mark.slow
@pytest.mark.parametrize("probe", PROBES)
def test_op_matches_reference(backend, probe):
    op, index = probe
    reason = _table(backend.NAME).unsupported.get(op)
    if reason:
        pytest.skip(f"{backend.NAME} declares {op} unsupported: {reason}")
    w, dtype, result = _gate(backend, op, index)
    detail = "; ".join(
        f"{c.what} {c.violation:.3g}x (worst {c.worst or '-'})" for c in result.checks
    )
    assert result.equivalent, f"{backend.NAME} {w.name} {dtype}: {result.divergence} [{detail}]"
    expected = {"forward"} | ({"loss", "grads", "params"} if trains(backend) else set())
    assert {c.what for c in result.checks} == expected


def test_a_probe_catches_a_planted_defect(monkeypatch):
    """The probe of ``gelu`` on torch with the tanh approximation planted where the exact (erf)
    form belongs: ~1e-3 apart, far outside float64's bounds, so the gate must refuse it."""
    torch_backend = usable_backend("torch")
    import torch

    exact = torch.nn.GELU
    monkeypatch.setattr(torch.nn, "GELU", lambda approximate: exact(approximate="tanh"))
    _, _, result = _gate(torch_backend, "gelu", 0)
    assert not result.equivalent
    assert result.checks[0].what == "forward" and result.checks[0].violation > 1
