"""The decoder's ops (issue 45) in float32, on each fast-path form a backend lowers them to: the
conformance probes of ``causal_attention`` and ``tied_dense`` (``tests/conformance/test_ops.py``
runs them in float64, the slow tier) gated as a cell is, against the float64 reference at the
probes' float32 tolerances (forward, loss, every gradient, SGD steps: ``rosetta.spec.probes``).
Torch's default is one ``scaled_dot_product_attention(is_causal=True)``; JAX's on the CPU is the
composed form, ``jax.nn.dot_product_attention(is_causal=True)`` its other. A causal mask that
lets a query read one later key moves the forward far past the bound (planted below)."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.runner.gate import run_gate
from rosetta.spec.probes import probe_batch, probe_workload
from rosetta.spec.weights import canonical_weights

FORMS = [
    ("torch", "sdpa"), ("torch", "composed"), ("jax", "jax.nn"), ("jax", "composed"),
]  # fmt: skip


def _usable(name: str):
    st = backends.status(name)
    if not st.usable:
        pytest.skip(f"{name}: {st.reason}")
    return backends.load(name)


def _gate(name: str, op: str, **options):
    w = probe_workload(op, 0)
    params = canonical_weights(w, 0)
    model = make(_usable(name), w, params, dtype="float32", **options)
    x, y = probe_batch(w)
    return run_gate(model, w, params, x, y, "float32")


@pytest.mark.parametrize(("name", "form"), FORMS)
def test_causal_attention_in_float32_matches_the_reference(name, form):
    result = _gate(name, "causal_attention", attention=form)
    detail = "; ".join(f"{c.what} {c.violation:.3g}x" for c in result.checks)
    assert result.equivalent, f"{name} {form}: {result.divergence} [{detail}]"
    assert {c.what for c in result.checks} == {"forward", "loss", "grads", "params"}


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_tied_dense_in_float32_matches_the_reference(name):
    result = _gate(name, "tied_dense")
    detail = "; ".join(f"{c.what} {c.violation:.3g}x" for c in result.checks)
    assert result.equivalent, f"{name}: {result.divergence} [{detail}]"


def test_the_gate_sees_a_causal_mask_one_key_too_wide(monkeypatch):
    """torch's composed form with ``triu(2)`` (query i also reads key i + 1): the forward fails."""
    import torch

    real = torch.Tensor.triu

    def one_too_wide(self, diagonal=0):
        return real(self, diagonal + 1 if diagonal == 1 else diagonal)

    monkeypatch.setattr(torch.Tensor, "triu", one_too_wide)
    result = _gate("torch", "causal_attention", attention="composed")
    assert not result.equivalent
    forward = next(c for c in result.checks if c.what == "forward")
    assert forward.violation > 10, forward


def test_a_tied_head_shares_one_parameter_in_torch():
    """The tie is one ``nn.Parameter`` (a copy would fail the gate above: the table's gradient is
    both uses' sum), and ``get_params`` returns the table once, under the embedding's name."""
    w = probe_workload("tied_dense", 0)
    params = canonical_weights(w, 0)
    model = make(_usable("torch"), w, params, dtype="float32")
    got = model.get_params()
    assert "lm_head.kernel" not in got and "probe_embedding.table" in got
    np.testing.assert_array_equal(got["probe_embedding.table"], params["probe_embedding.table"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["numpy_ref", "torch", "jax"])
def test_the_generated_source_of_the_decoder_ops_matches_the_reference(name, tmp_path):
    """``rosetta code`` of each decoder-op probe (the causal helper; the tie written as the
    framework writes it: nanoGPT's shared ``weight`` in torch, the table read twice in JAX), run
    as a file, against the float64 reference at the probes' float64 tolerances."""
    from rosetta import codegen
    from tests.conformance.generated_run import GeneratedRun, run_files

    _usable(name)
    jobs, cases = {}, {}
    for op in ("causal_attention", "tied_dense"):
        w = probe_workload(op, 0)
        params = canonical_weights(w, 0)
        x, y = probe_batch(w)
        jobs[op] = (codegen.generate(w, name), w, params, x, y)
        cases[op] = (w, params, x, y)
    out = run_files(jobs, "float64", tmp_path)
    for op, (w, params, x, y) in cases.items():
        assert not isinstance(out[op], str), f"{name} {op} --check failed:\n{out[op]}"
        result = run_gate(GeneratedRun(name, out[op], params), w, params, x, y, "float64")
        assert result.equivalent, f"{name} {op}: {result.divergence}"
