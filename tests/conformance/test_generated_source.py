"""Every generated source file computes what the float64 NumPy reference computes.

Each (backend, workload) file from ``rosetta code`` is written to a temporary folder and run in a
fresh interpreter with no ``rosetta`` on its path (``--check``: canonical weights in, forward,
loss, gradients and the change after 3 optimiser steps out), then judged by the equivalence gate
itself (``rosetta.runner.gate.run_gate``, the spec's ``tolerances[dtype]``), exactly as a lowered
model is. The quick suite runs one case per framework (about 60 s on a quiet machine, within the
90 s budget); the other 25 cases are marked slow (``pytest -m slow tests/conformance``).
"""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from rosetta import codegen
from rosetta.runner.gate import run_gate
from rosetta.spec import get_workload
from rosetta.spec.probes import probe_batch, probe_workload
from tests.conformance.conftest import DTYPES, WORKLOADS, gate_batch, weights
from tests.conformance.engine_process import keras_engine
from tests.conformance.generated_run import GeneratedRun, gate_generated, run_file, run_files

#: the quick suite: one case per framework, every workload among them, at float32 (float64 is the
#: slow tier's: conftest.SLOW_PARAMS)
QUICK = {
    ("numpy_ref", "cnn", "float32"),
    ("torch", "gru", "float32"),
    ("tensorflow", "cnn", "float32"),
    ("jax", "resnet50", "float32"),
    ("chainer", "gru", "float32"),
    ("paddle", "cnn", "float32"),
    ("keras_torch", "cnn", "float32"),
}
RESNET_SIZE = 32  # ResNet-50 at 32x32: the same parameters, a fraction of the time


def _cases():
    for backend in codegen.BACKENDS:
        for workload in WORKLOADS:
            for dtype in DTYPES:
                # a Keras engine's cases join its other checks' worker group (conftest
                # .backend_params), so its child pytest starts once for all of them; the others
                # build no shared model and go to whichever worker is free
                marks = []
                if keras_engine(backend):
                    marks.append(pytest.mark.xdist_group(f"conformance-{backend}"))
                if (backend, workload, dtype) not in QUICK:
                    marks.append(pytest.mark.slow)
                yield pytest.param(
                    backend, workload, dtype, marks=marks, id=f"{backend}-{workload}-{dtype}"
                )


def _workload(name: str):
    w = get_workload(name)
    return w.at_image_size(RESNET_SIZE) if name == "resnet50" else w


def _skip_unless_installed(backend: str) -> None:
    missing = [m for m in codegen.imports(backend) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{backend}: {', '.join(missing)} not installed")


@pytest.mark.parametrize("backend, workload_name, dtype", list(_cases()))
def test_generated_file_matches_reference(backend, workload_name, dtype, tmp_path):
    _skip_unless_installed(backend)
    workload = _workload(workload_name)
    params = weights(workload)
    x, y = gate_batch(workload, n=2 if workload_name == "resnet50" else 4)
    gen = codegen.generate(workload, backend)
    result = gate_generated(gen, workload, params, x, y, dtype, tmp_path)
    detail = "; ".join(
        f"{c.what} {c.violation:.3g}x (worst {c.worst or '-'})" for c in result.checks
    )
    assert result.equivalent, f"{gen.name} {dtype}: {result.divergence} [{detail}]"
    expected = {"forward"} | ({"loss", "grads", "params"} if workload.task == "train" else set())
    assert {c.what for c in result.checks} == expected


def test_a_planted_defect_in_a_generated_file_fails_the_gate(tmp_path):
    """The check can fail: the NumPy CNN file with its momentum dropped (SGD without momentum)
    passes forward, loss and gradients but not the parameters after 3 steps."""
    workload = get_workload("cnn")
    params = weights(workload)
    x, y = gate_batch(workload)
    gen = codegen.generate(workload, "numpy_ref")
    assert "SGD(lr=0.01, momentum=0.9, nesterov=False)" in gen.text
    broken = codegen.Generated(
        gen.workload,
        gen.backend,
        gen.name,
        gen.text.replace("SGD(lr=0.01, momentum=0.9,", "SGD(lr=0.01, momentum=0.0,"),
    )
    out = run_file(broken, workload, params, x, y, "float64", tmp_path)
    result = run_gate(GeneratedRun("numpy_ref", out, params), workload, params, x, y, "float64")
    verdict = {c.what: c.ok for c in result.checks}
    assert verdict == {"forward": True, "loss": True, "grads": True, "params": False}
    assert np.isfinite(out["loss"])


@pytest.mark.slow
def test_keras_stock_adam_instead_of_the_written_out_one_fails_at_float64(tmp_path):
    """Why the Keras file writes the spec's Adam out: with keras.optimizers.Adam (epsilon added
    to sqrt(v) before the bias correction) the float64 parameter check fails."""
    _skip_unless_installed("tensorflow")
    workload = get_workload("gru")
    params = weights(workload)
    x, y = gate_batch(workload)
    gen = codegen.generate(workload, "tensorflow")
    stock = "keras.optimizers.Adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-08)"
    ours = "Adam(model.trainable_variables, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-08)"
    assert ours in gen.text
    broken = codegen.Generated(gen.workload, gen.backend, gen.name, gen.text.replace(ours, stock))
    out = run_file(broken, workload, params, x, y, "float64", tmp_path)
    result = run_gate(GeneratedRun("tensorflow", out, params), workload, params, x, y, "float64")
    verdict = {c.what: c.ok for c in result.checks}
    assert verdict == {"forward": True, "loss": True, "grads": True, "params": False}


#: the probes (rosetta.spec.probes) whose source form is their own: every graph form the
#: renderers write (two branches joined by add and by concat, channels-first's axis 1 becoming
#: channels-last's; three inputs; a masked op inside a graph) and the grouped convolutions
#: (depthwise with a channel multiplier, and 2 groups), which some renderers write as a helper;
#: a softmax over an image's width (axis 2 of a channels-last file's, not its last); average
#: pooling's padded forms (zeros counted or not, symmetric or not, Keras' "same"), which
#: renderers write as a pool, a padding and a pool, or a helper dividing by real cells
PROBES = (
    ("add", 0), ("add", 1), ("add", 2), ("concat", 0), ("concat", 1), ("concat", 3),
    ("conv2d", 3), ("conv2d", 4), ("lstm", 0), ("softmax", 2),
    ("avgpool2d", 1), ("avgpool2d", 2), ("avgpool2d", 3), ("avgpool2d", 4), ("avgpool2d", 5),
)  # fmt: skip


def _graph_cases():
    for backend in codegen.BACKENDS:
        # a backend's probes share one interpreter (run_files), so one worker; a Keras engine's
        # join its other checks' group (its child pytest runs them all)
        group = f"conformance-{backend}" if keras_engine(backend) else f"probes-{backend}"
        marks = [pytest.mark.slow, pytest.mark.xdist_group(group)]
        for op, index in PROBES:
            yield pytest.param(backend, op, index, marks=marks, id=f"{backend}-{op}-{index}")


#: {backend: {probe key: the file's outputs, or its error}}, filled on a backend's first probe
_PROBE_RUNS: dict[str, dict] = {}


def _probe(op: str, index: int):
    workload = probe_workload(op, index)
    return workload, weights(workload), *probe_batch(workload)


def _probe_outputs(backend: str, tmp_path_factory) -> dict:
    """Every probe file of ``backend`` run in one interpreter (``run_files``, float64: the
    probes' strict tolerances), once per backend and process: each file is small, and a fresh
    interpreter per file paid the framework's import 15 times (6-17 s each for Keras)."""
    if backend not in _PROBE_RUNS:
        jobs = {}
        for op, index in PROBES:
            workload, params, x, y = _probe(op, index)
            jobs[f"{op}-{index}"] = (codegen.generate(workload, backend), workload, params, x, y)
        folder = tmp_path_factory.mktemp(f"probes-{backend}")
        _PROBE_RUNS[backend] = run_files(jobs, "float64", folder)
    return _PROBE_RUNS[backend]


@pytest.mark.parametrize("backend, op, index", list(_graph_cases()))
def test_generated_probe_matches_reference(backend, op, index, tmp_path_factory):
    """A wired graph (layers naming their inputs) or a grouped convolution as each framework's
    source: the file computes what the float64 reference computes, at float64 (the probes'
    strict tolerances)."""
    _skip_unless_installed(backend)
    out = _probe_outputs(backend, tmp_path_factory)[f"{op}-{index}"]
    workload, params, x, y = _probe(op, index)
    gen_name = codegen.generate(workload, backend).name
    assert not isinstance(out, str), f"{gen_name} --check failed:\n{out}"
    result = run_gate(GeneratedRun(backend, out, params), workload, params, x, y, "float64")
    detail = "; ".join(
        f"{c.what} {c.violation:.3g}x (worst {c.worst or '-'})" for c in result.checks
    )
    assert result.equivalent, f"{gen_name}: {result.divergence} [{detail}]"


def test_one_interpreter_reports_each_file_and_a_failing_file_spoils_no_other(tmp_path):
    """``run_files``: a file that raises, one that exits non-zero and a good one, in one batch:
    the good one's outputs come back and each bad one's own error, in its own key."""
    workload, params, x, y = _probe("add", 0)
    good = codegen.generate(workload, "numpy_ref")
    raises = dataclasses.replace(good, text=good.text + "\nraise ValueError('planted')\n")
    exits = dataclasses.replace(good, text="import sys\nsys.exit(3)\n")
    jobs = {name: (g, workload, params, x, y) for name, g in
            (("raises", raises), ("exits", exits), ("good", good))}  # fmt: skip
    out = run_files(jobs, "float64", tmp_path)
    assert "ValueError: planted" in out["raises"] and out["exits"] == "exit 3"
    result = run_gate(GeneratedRun("numpy_ref", out["good"], params), workload, params, x, y,
                      "float64")  # fmt: skip
    assert result.equivalent, result.divergence
