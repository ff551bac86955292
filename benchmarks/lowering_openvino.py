"""Lowering overhead of the OpenVINO backend: the lowered model vs ``benchmark_app``'s compiled
model of the same file.

``python -m benchmarks lowering_openvino [--workloads cnn,gru,resnet50,transformer] [--rounds N]
[--threads N] [--image-size S] [--no-ceiling] [--hand-first]``

For each workload the lowered model (``rosetta.backends.openvino`` from the canonical weights:
LATENCY hint, f32, the cell's threads, a static graph per batch) and the hand-written baseline
(the lowered model's own export written to a ``.onnx`` file and compiled as ``benchmark_app -api
sync -shape input[B,...]`` compiles it, ``benchmarks/handwritten/engine_sessions.py``: LATENCY, the
plugin's threads and pinning, ``-infer_precision f32`` where the plugin's default precision is
not float32 (bf16 on an avx512_bf16 or AMX CPU), on its own ``ov.Core``) first show that they
compute the same outputs (float32: 1e-4 relative); then ``benchmarks._lowering`` times one
synchronous forward pass of each at the workload's batch, interleaved: the lowered model through
its ``predict`` (what the runner times), the baseline through ``request.infer({0: x})``.

Two more forms are timed in the same rounds and reported against the lowered model, never as
the baseline: ``tool_default_precision`` (benchmark_app with no ``-infer_precision``, where that
is not float32: another function; its error against the lowered output is in the record) and
``throughput_hint`` (benchmark_app's default hint without ``-api sync``, THROUGHPUT, in the
baseline's precision, called one request at a time as the runner calls it; benchmark_app itself
would keep several requests in flight). The record holds every form's settings as read back from
its compiled model.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from benchmarks._lowering import Pair, assert_same, run, workload_batch


def setup(args: argparse.Namespace) -> dict:
    """OpenVINO's version and the CPU plugin's own inference precision on this machine."""
    import openvino as ov

    from benchmarks.handwritten import engine_sessions as es

    return {"openvino": ov.get_version(), "plugin_default_precision": es.default_precision()}


def _error(got: np.ndarray, want: np.ndarray) -> dict:
    """How far ``got`` is from ``want``: the largest difference relative to the largest output,
    and whether it passes the float32 check."""
    try:
        assert_same(got, want)
        same = True
    except AssertionError:
        same = False
    scale = float(np.abs(want).max()) or 1.0
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
    return {"max_abs_diff_over_max_abs": float(diff) / scale, "passes_float32_1e-4": same}


def prepare(name: str, args: argparse.Namespace) -> Pair:
    """The lowered model of ``name`` and benchmark_app's compiled model of its export, checked
    equal; the tool's default precision and hint as extra forms."""
    from benchmarks.handwritten import engine_sessions as es
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, _ = workload_batch(name, args.image_size)
    lowered = make("openvino", w, canonical_weights(w), dtype="float32",
                   threads=args.threads or None)  # fmt: skip
    batch = next(iter(lowered.loader(x, None, np.arange(len(x)), len(x))))  # the runner's batch
    xb = batch[0]
    want = lowered.predict(batch)  # also compiles the lowered graph at this batch
    pinned = es.baseline_precision()  # "f32" where the plugin's default is not float32
    with tempfile.TemporaryDirectory() as tmp:
        path = es.write_export(lowered.graph, tmp)
        tool = es.benchmark_app_session(path, xb.shape, precision=pinned, threads=args.threads)
        forms = {"throughput_hint": es.benchmark_app_session(
            path, xb.shape, api="async", precision=pinned, threads=0)}  # fmt: skip
        if pinned is not None:
            forms["tool_default_precision"] = es.benchmark_app_session(
                path, xb.shape, precision=None, threads=args.threads
            )
    assert_same(tool.run(xb), want)  # the same function, else no timing
    facts = {
        "lowered_settings": lowered.engine_settings(),
        "handwritten": tool.label,
        "handwritten_command": tool.command,
        "handwritten_settings": tool.settings,
        "input": f"{xb.dtype} {tuple(xb.shape)}, the same array on every side",
    }
    for label, form in forms.items():
        facts[label] = {"form": form.label, "command": form.command, "settings": form.settings,
                        "error_vs_lowered": _error(form.run(xb), want)}  # fmt: skip
    return Pair(lambda: lowered.predict(batch), lambda: tool.run(xb), train=False,
                batch=len(xb), facts=facts,
                alternatives={k: (lambda f=f: f.run(xb)) for k, f in forms.items()})  # fmt: skip


def main(argv: list[str]) -> int:
    return run("openvino", prepare, argv, setup=setup)
