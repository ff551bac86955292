"""The two serving engines run the way their own benchmark tools run an ONNX file.

The hand-written baseline of an engine is not a model (the model *is* the lowered model's ONNX
export) but the settings a user gets from the engine's own tool, applied to the same ``.onnx``
file and called plainly: ``sess.run(None, {name: x})`` / ``request.infer({0: x})``. The lowered
model (``rosetta.backends.onnxruntime`` / ``.openvino``) is timed against it by
``benchmarks/lowering_onnxruntime.py`` and ``benchmarks/lowering_openvino.py``.

**ONNX Runtime, as ``onnxruntime_perf_test`` runs it** with no options but the model
(``onnxruntime/test/perftest/command_args_parser.cc`` and ``test_configuration.h``, applied in
``ort_test_session.cc``): the CPU execution provider (``-e cpu``); graph optimisation level
``-o 99`` = ``ORT_ENABLE_ALL`` (the flag's help: "Default is 99 (all)"; the perftest README's
"Default is 1" is stale); ``-x 0``: intra-op threads left to ONNX Runtime (``SetIntraOpNumThreads``
is called only for ``-x`` > 0; ORT then uses one thread per physical core, per its threading
guide); ``-y 0`` and no ``-P``: the sequential executor, no inter-op threads set; the memory
arena and memory pattern on (no ``-A``/``-M``); spinning untouched (no ``--disable_spinning``:
ORT's default, spin). One run at a time (``-c 1``). :func:`perf_test_options` states these in a
``SessionOptions``; ``threads`` > 0 is ``-x threads``.

**OpenVINO, as ``benchmark_app`` runs it** (``openvino/tools/benchmark/main.py`` of the installed
OpenVINO): no ``-hint`` and no ``-api`` means ``-api async`` with ``PERFORMANCE_HINT=THROUGHPUT``
(streams and requests chosen by the plugin); ``-api sync`` (one request, the form the runner
times) means ``PERFORMANCE_HINT=LATENCY`` (one stream). No ``-nthreads``, ``-pin`` or
``-nstreams`` (they need ``-hint none``): the plugin's own threads and pinning. No
``-infer_precision``: the CPU plugin's default inference precision, which on a CPU with
avx512_bf16 or AMX is **bf16** (OpenVINO's CPU device guide; read back here by
:func:`default_precision`). A bf16 default computes a different function from the lowered
model's float32 one, so the baseline pins ``INFERENCE_PRECISION_HINT=f32`` where the default is
not f32 (``-infer_precision f32``) and the tool's default precision is kept only as an extra,
labelled form. ``-shape input[B,...]`` makes the graph static at the batch (``Model.reshape``).
benchmark_app also makes an NCHW input with 3 channels a ``u8`` tensor by default (its
``pre_post_processing``); the batch here is float32, so the input keeps the model's type
(``-ip f32``). ``threads`` > 0 is ``-hint none -nthreads threads`` (the plugin's own default
hint then applies).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from rosetta.export.graph import INPUT

#: the execution provider / device both sides run on
ORT_PROVIDER = "CPUExecutionProvider"
OV_DEVICE = "CPU"


@dataclass(frozen=True)
class ToolSession:
    """One engine session configured as the engine's tool configures it.

    ``run(x)``: one batch (NumPy, the export's input) -> the export's output (NumPy);
    ``command``: the tool's command line this session stands for; ``settings``: the settings in
    effect, read back from the engine (not the ones asked for)."""

    label: str
    command: str
    run: Callable[[np.ndarray], np.ndarray]
    settings: dict = field(default_factory=dict)


def write_export(graph: onnx.ModelProto, directory: str | Path) -> Path:
    """``graph`` (the lowered model's export) as ``model.onnx`` in ``directory``: the file a
    user hands to the engine's tool."""
    path = Path(directory) / "model.onnx"
    path.write_bytes(graph.SerializeToString())
    return path


# -- ONNX Runtime ---------------------------------------------------------------------------------
def ort_runner(model: str | Path | bytes, options) -> tuple[object, Callable]:
    """An ``InferenceSession`` of ``model`` (a path or serialised bytes) with ``options`` on the
    CPU provider, and its plain call ``x -> sess.run(None, {INPUT: x})[0]``."""
    import onnxruntime as ort

    model = str(model) if isinstance(model, Path) else model
    sess = ort.InferenceSession(model, options, providers=[ORT_PROVIDER])
    return sess, lambda x: sess.run(None, {INPUT: x})[0]


def perf_test_options(threads: int = 0):
    """``onnxruntime_perf_test``'s session options with no flags (module docstring);
    ``threads`` > 0 is its ``-x threads``."""
    import onnxruntime as ort

    so = ort.SessionOptions()  # arena and memory pattern on: perf_test's defaults too
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # -o 99
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL  # no -P
    if threads > 0:  # -x N; with -x 0 perf_test leaves the field alone (ORT picks)
        so.intra_op_num_threads = int(threads)
    return so


def ort_settings(sess) -> dict:
    """The settings an ``InferenceSession`` runs with, read back from its options (the keys of
    the backend's ``runtime.settings_of``, which needs the spinning entry set; unset here is the
    engine's default, spin)."""
    so = sess.get_session_options()
    try:
        spinning = so.get_session_config_entry("session.intra_op.allow_spinning")
    except RuntimeError:  # not set: ORT's default
        spinning = "unset (ORT default: 1)"
    return {
        "graph_optimization_level": str(so.graph_optimization_level).rsplit(".", 1)[-1],
        "intra_op_num_threads": int(so.intra_op_num_threads),
        "inter_op_num_threads": int(so.inter_op_num_threads),
        "execution_mode": str(so.execution_mode).rsplit(".", 1)[-1],
        "allow_spinning": spinning,
        "enable_mem_pattern": bool(so.enable_mem_pattern),
        "enable_cpu_mem_arena": bool(so.enable_cpu_mem_arena),
        "providers": ",".join(sess.get_providers()),
    }


def _live_threads() -> int | None:
    """This process's thread count (Linux), to see how many threads a session started."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def perf_test_session(path: str | Path, threads: int = 0) -> ToolSession:
    """``onnxruntime_perf_test -e cpu [-x threads] <path>``'s session on ``path``. The settings
    add ``intra_op_threads_in_effect``: the threads the session started plus the caller's, which
    is what ``intra_op_num_threads = 0`` resolved to."""
    before = _live_threads()
    sess, run = ort_runner(path, perf_test_options(threads))
    after = _live_threads()
    settings = ort_settings(sess)
    if before is not None and after is not None:
        settings["intra_op_threads_in_effect"] = 1 + after - before  # pool threads + the caller
    flags = f"-x {threads} " if threads > 0 else ""
    return ToolSession(
        "onnxruntime_perf_test defaults",
        f"onnxruntime_perf_test -e cpu {flags}{Path(path).name}",
        run,
        settings,
    )


# -- OpenVINO -------------------------------------------------------------------------------------
def ov_runner(core, model, shape: tuple | None, config: dict) -> tuple[object, Callable]:
    """``model`` (a path, an ``io.BytesIO`` of the ONNX bytes, or a read ``ov.Model``) made
    static at ``shape`` (``None``: as it is), compiled for the CPU with ``config``; returns the
    compiled model and the plain synchronous call ``x -> request.infer({0: x})[0]``."""
    read = core.read_model(str(model) if isinstance(model, Path) else model)
    if shape is not None:
        read.reshape({INPUT: list(shape)})
    compiled = core.compile_model(read, OV_DEVICE, config)
    request = compiled.create_infer_request()
    return compiled, lambda x: request.infer({0: x})[0]


def ov_settings(compiled) -> dict:
    """The settings a compiled model runs with, read back from it: the lowered model's keys
    (the backend's ``runtime.settings_of``) and the number of requests ``benchmark_app -api
    async`` would keep in flight."""
    from rosetta.backends.openvino.runtime import settings_of

    requests = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    return {**settings_of(compiled), "OPTIMAL_NUMBER_OF_INFER_REQUESTS": requests}


def default_precision(core=None) -> str:
    """The CPU plugin's own inference precision (no hint given), as it reports it:
    ``bfloat16`` on a CPU with avx512_bf16 or AMX, ``float32`` elsewhere."""
    import openvino as ov

    core = core or ov.Core()
    value = str(core.get_property(OV_DEVICE, "INFERENCE_PRECISION_HINT"))
    return value.removeprefix("<Type: '").removesuffix("'>")


def benchmark_app_config(api: str = "sync", precision: str | None = None, threads: int = 0) -> dict:
    """The compile config ``benchmark_app`` passes for ``-api api`` (no ``-hint``), with
    ``-infer_precision precision`` when given (``None``: the plugin's default) and ``-hint none
    -nthreads threads`` when ``threads`` > 0."""
    if api not in ("sync", "async"):
        raise ValueError(f"api must be 'sync' or 'async', not {api!r}")
    config: dict = {}
    if threads > 0:  # -nthreads needs -hint none: no hint set, the plugin's own applies
        config["INFERENCE_NUM_THREADS"] = int(threads)
    else:
        config["PERFORMANCE_HINT"] = "LATENCY" if api == "sync" else "THROUGHPUT"
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    return config


def benchmark_app_session(
    path: str | Path,
    shape: tuple,
    *,
    api: str = "sync",
    precision: str | None = None,
    threads: int = 0,
    core=None,
) -> ToolSession:
    """``benchmark_app -m <path> -d CPU -shape input[shape] -ip f32 -api api`` (plus
    ``-infer_precision``/``-nthreads`` as :func:`benchmark_app_config` says) compiled on a fresh
    ``ov.Core`` (no property another session set), called one synchronous request at a time."""
    import openvino as ov

    core = core or ov.Core()
    config = benchmark_app_config(api, precision, threads)
    compiled, run = ov_runner(core, Path(path), shape, config)
    dims = ",".join(str(d) for d in shape)
    flags = f"-api {api}"
    if threads > 0:
        flags += f" -hint none -nthreads {threads}"
    if precision is not None:
        flags += f" -infer_precision {precision}"
    label = f"benchmark_app -api {api}" + (f", {precision}" if precision else ", default precision")
    command = f"benchmark_app -m {Path(path).name} -d CPU -shape {INPUT}[{dims}] -ip f32 {flags}"
    return ToolSession(label, command, run, ov_settings(compiled))


def baseline_precision(core=None) -> str | None:
    """The ``-infer_precision`` the baseline passes: ``f32`` where the plugin's default is not
    float32 (bf16 computes another function), else ``None`` (the tool's default as it is)."""
    return None if default_precision(core) == "float32" else "f32"
