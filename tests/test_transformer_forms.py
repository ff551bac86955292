"""The transformer's other fast-path forms, each gated as a cell is: the build options that
``python -m benchmarks fastpath_transformer`` times against the defaults (torch's composed
attention, JAX's composed attention under jit, TensorFlow under XLA) compute what the float64
reference computes, at the spec's float32 tolerances (forward, loss, gradients, 3 AdamW steps
through the timed program), on the conformance batch with the edge rows beside it (a review of
padding only: every key masked; one real token; three). The defaults are the conformance
suite's; an unknown form is one line."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.errors import BackendError
from rosetta.runner.gate import run_gate
from rosetta.spec import get_workload
from tests.conformance.conftest import gate_batch, weights
from tests.conformance.test_edge_cases import edge_transformer_reviews

#: (backend, build options, what its manifest then says), one per form that is not the default:
#: the slow tier's (a form no cell runs unless asked for; TensorFlow under XLA compiles its step
#: for ~20 s, the others ~9 s each), beside the unknown-form lines below
FORMS = [
    pytest.param("torch", {"attention": "composed"}, ("attention", "composed: torch.matmul"),
                 id="torch", marks=pytest.mark.slow),
    pytest.param("jax", {"attention": "jax.nn"}, ("attention", "jax.nn.dot_product_attention"),
                 id="jax",
                 marks=pytest.mark.slow),
    pytest.param("tensorflow", {"jit_compile": True}, ("compile", "tf.function+xla"),
                 id="tensorflow", marks=pytest.mark.slow),
]  # fmt: skip


def _usable(name: str):
    st = backends.status(name)
    if not st.usable:
        pytest.skip(f"{name}: {st.reason}")
    return backends.load(name)


@pytest.mark.parametrize(("name", "options", "said"), FORMS)
def test_each_other_form_matches_the_reference(name, options, said):
    module = _usable(name)
    w = get_workload("transformer")
    params = weights(w)
    x, y = gate_batch(w, n=4)
    ex, ey = edge_transformer_reviews()
    x, y = np.concatenate([x, ex[:3]]), np.concatenate([y, ey[:3]])  # + padding only, 1, 3 words
    model = make(module, w, params, **options)
    key, text = said
    manifest = model.manifest()
    assert text in manifest[key], manifest[key]  # the form asked for is the form that runs
    why = manifest["attention_reason" if key == "attention" else "compile_reason"]
    assert "asked for" in why or "build's" in why, why
    result = run_gate(model, w, params, x, y, "float32")
    detail = "; ".join(f"{c.what} {c.violation:.3g}x" for c in result.checks)
    assert result.equivalent, f"{name} {options}: {result.divergence} [{detail}]"
    assert {c.what for c in result.checks} == {"forward", "loss", "grads", "params"}


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_an_unknown_attention_form_is_one_line(name):
    module = _usable(name)
    w = get_workload("transformer")
    with pytest.raises(BackendError, match="attention='flash'; valid: ") as e:
        make(module, w, weights(w), attention="flash")
    assert "\n" not in str(e.value) and "composed" in str(e.value)
