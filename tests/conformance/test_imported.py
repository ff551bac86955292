"""Every backend runs every imported model of the ``rosetta import`` corpus
(``tests/test_import.py``: models written with ``torch.nn`` and exported by ``torch.onnx``),
gated against the float64 reference at the imported workload's float32 tolerances: forward, and
for a training workload (the GRU classifier) its loss, gradients and optimiser steps too.
Slow tier; a Keras engine leaves these to tensorflow (``conftest.ENGINE_CHECKS_ON_TENSORFLOW``)."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta import backends
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights
from tests.conformance.conftest import usable_backend

pytest.importorskip("torch")
pytest.importorskip("onnx")

from tests.test_import import CORPUS, build_corpus, sample_input  # noqa: E402  (after the skips)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("corpus"))


def _cases():
    for name in backends.names():
        if name == "numpy_ref":
            continue
        marks = [pytest.mark.slow]
        for model in CORPUS:
            yield pytest.param(name, model, marks=marks, id=f"{name}-{model}")


@pytest.mark.parametrize("backend, model", list(_cases()))
def test_every_backend_runs_the_imported_model(corpus, backend, model):
    usable_backend(backend)
    _, workload = corpus[model]
    params = canonical_weights(workload, 0)
    built = backends.make(backend, workload, params, dtype="float32")
    x = sample_input(workload, 2, 0)
    # a training workload (a token model trains) is gated on its loss, gradients and steps too
    # (an engine, forward-only, gates the forward pass)
    train = workload.task == "train" and not backends.training_unsupported(backend)
    y = np.array([0, 1]) if train else None
    result = run_gate(built, workload, params, x, y, "float32")
    detail = "; ".join(f"{c.what} {c.violation:.3g}x" for c in result.checks)
    assert result.equivalent, f"{backend} {model}: {result.divergence} [{detail}]"


#: imported models whose generated source (``rosetta code NAME --backend B``) is gated too: a
#: wired graph of branches, inverted residuals with depthwise convolutions, a token model's LSTM,
#: an encoder whose attention, GELU and masked mean were recognised regions of the file
SOURCE_MODELS = ("inceptionish", "mobilenetv2ish", "lstm", "transformer")


def _source_cases():
    from rosetta import codegen

    for name in codegen.BACKENDS:
        marks = [pytest.mark.slow]
        for model in SOURCE_MODELS:
            yield pytest.param(name, model, marks=marks, id=f"{name}-{model}")


@pytest.mark.parametrize("backend, model", list(_source_cases()))
def test_the_generated_source_of_an_imported_model_matches_the_reference(
    corpus, backend, model, tmp_path
):
    """The translation of a user's model into each framework's source computes what the
    reference computes, at float32 (the imported workload's bounds), in a fresh interpreter."""
    from rosetta import codegen
    from tests.conformance.generated_run import gate_generated

    usable_backend(backend)
    _, workload = corpus[model]
    params = canonical_weights(workload, 0)
    x = sample_input(workload, 2, 0)
    y = np.array([0, 1]) if workload.task == "train" else None
    gen = codegen.generate(workload, backend)
    result = gate_generated(gen, workload, params, x, y, "float32", tmp_path)
    detail = "; ".join(f"{c.what} {c.violation:.3g}x" for c in result.checks)
    assert result.equivalent, f"{gen.name}: {result.divergence} [{detail}]"
