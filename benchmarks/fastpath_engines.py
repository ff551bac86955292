"""The measurements behind the serving engines' fast-path settings (``backends/onnxruntime``,
``backends/openvino``: ``runtime.py`` of each).

``python -m benchmarks fastpath_engines [--only ort_level,ort_executor,ov_hint,ov_shape]
[--workloads cnn,gru,resnet50] [--batches 1,spec] [--rounds-scale F] [--threads N]``

Each job times one forward pass of the workload's export (batch 1 and the spec's batch),
interleaved, on the same weights, and prints the ratio (< 1: the first setting is faster):

- ``ort_level``: ``ORT_ENABLE_ALL`` (the backend's) / ``ORT_ENABLE_EXTENDED`` (no NCHWc layout
  transformer) and / ``ORT_ENABLE_BASIC``;
- ``ort_executor``: ``ORT_SEQUENTIAL`` with 1 inter-op thread (the backend's) / ``ORT_PARALLEL``
  with 2;
- ``ov_hint``: ``PERFORMANCE_HINT=LATENCY`` (the backend's) / ``THROUGHPUT``, one synchronous
  request at a time (how the runner calls it);
- ``ov_shape``: a static graph per batch shape (the backend's) / one graph with a dynamic batch.

Run it alone on a quiet machine (the lead's measurement); the choices in ``runtime.py`` stand
until it says otherwise.
"""

from __future__ import annotations

import argparse
import io

from benchmarks.common import interleaved, random_batch, ratio, report
from benchmarks.handwritten.engine_sessions import ort_runner, ov_runner
from rosetta.export.graph import to_model
from rosetta.spec import canonical_weights, get_workload


def _ort(model_bytes: bytes, threads: int, **changes):
    """The backend's session options with ``changes``: a plain session call."""
    from rosetta.backends.onnxruntime import runtime as settings

    so = settings.session_options(threads)
    for k, v in changes.items():
        setattr(so, k, v)
    return ort_runner(model_bytes, so)[1]


def _ov(model_bytes: bytes, threads: int, shape: tuple | None, **changes):
    """The backend's compile config with ``changes`` on its ``Core``: one synchronous request."""
    from rosetta.backends.openvino import runtime as settings

    config = {**settings.compile_config("fp32", threads), **changes}
    return ov_runner(settings.CORE, io.BytesIO(model_bytes), shape, config)[1]


def _pairs(job: str, model_bytes: bytes, threads: int, shape: tuple) -> dict:
    """The settings a job compares, the backend's first: name -> run(x)."""
    import onnxruntime as ort

    level = ort.GraphOptimizationLevel
    if job == "ort_level":
        return {
            "ENABLE_ALL": _ort(model_bytes, threads),
            "ENABLE_EXTENDED": _ort(
                model_bytes, threads, graph_optimization_level=level.ORT_ENABLE_EXTENDED
            ),
            "ENABLE_BASIC": _ort(
                model_bytes, threads, graph_optimization_level=level.ORT_ENABLE_BASIC
            ),
        }
    if job == "ort_executor":
        return {
            "SEQUENTIAL": _ort(model_bytes, threads),
            "PARALLEL": _ort(
                model_bytes,
                threads,
                execution_mode=ort.ExecutionMode.ORT_PARALLEL,
                inter_op_num_threads=2,
            ),
        }
    if job == "ov_hint":
        return {
            "LATENCY": _ov(model_bytes, threads, shape),
            "THROUGHPUT": _ov(model_bytes, threads, shape, PERFORMANCE_HINT="THROUGHPUT"),
        }
    if job == "ov_shape":
        return {
            "static": _ov(model_bytes, threads, shape),
            "dynamic": _ov(model_bytes, threads, None),
        }
    raise ValueError(job)


ROUNDS = {"cnn": 30, "gru": 30, "resnet50": 8}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks fastpath_engines")
    p.add_argument("--only", default="ort_level,ort_executor,ov_hint,ov_shape")
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--batches", default="1,spec", help="batch sizes; spec: the profile's")
    p.add_argument("--rounds-scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=0, help="0: every usable core")
    args = p.parse_args(argv)
    from rosetta.runtime import usable_cores

    threads = args.threads or usable_cores()
    rows, notes = [], {"threads": threads}
    for name in args.workloads.split(","):
        w = get_workload(name)
        model_bytes = to_model(w, canonical_weights(w)).SerializeToString()
        spec_batch = w.profile("full").batch_size
        for b in args.batches.split(","):
            n = spec_batch if b == "spec" else int(b)
            x, _ = random_batch(w, n)
            for job in args.only.split(","):
                runs = _pairs(job, model_bytes, threads, tuple(x.shape))
                rounds = max(3, round(ROUNDS[name] * args.rounds_scale))
                steps = {k: (lambda f=f, x=x: f(x)) for k, f in runs.items()}
                times = interleaved(steps, rounds=rounds, warmup=2)
                first, *others = runs
                for other in others:
                    row = ratio(f"{name} b{n} {first}/{other}", times[first], times[other])
                    print(row.line(), flush=True)
                    rows.append(row)
    report("fastpath_engines", rows, notes)
    return 0
