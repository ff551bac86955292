"""OpenVINO's process settings and its fast path (the CPU plugin's hints every compile gets).

One ``openvino.Core`` per process (``CORE``). ``set_threads(n)`` sets the CPU plugin's
``INFERENCE_NUM_THREADS`` and reads it back. The fast path (:func:`compile_config`):

- ``PERFORMANCE_HINT = LATENCY``: one stream using every thread for one request. The timed loop
  and the batch-1 latency both run one synchronous request at a time; ``THROUGHPUT`` would split
  the cores into several streams that only concurrent asynchronous requests can fill, so a
  lone request would run on a fraction of the cores;
- ``INFERENCE_PRECISION_HINT``: ``f32`` for fp32, stated explicitly: **on a CPU with
  avx512_bf16 or AMX the plugin's default is bf16**, so an fp32 cell that left it unset would
  compute in bfloat16 (read back on this machine: ``bfloat16``); ``bf16`` for the bf16 policy;
- ``INFERENCE_NUM_THREADS = n`` (the cell's threads), ``EXECUTION_MODE_HINT = PERFORMANCE``
  (the default: the plugin may fuse and reorder within the precision asked for);
- one static graph per batch shape (``Model.reshape`` then ``compile_model``, on first use: the
  compile lands in the cold start), the CPU plugin's fastest form.

Measured (``python -m benchmarks fastpath_engines --only ov_hint``, one synchronous request,
interleaved pairs, alone on a 2-core AMD EPYC Zen 4, 2026-11-25; ratio LATENCY / THROUGHPUT,
< 1: LATENCY faster): the CNN 0.587 [0.574, 0.604] (batch 1) and 0.504 [0.502, 0.506] (batch 64),
ResNet-50 (112 px, batch 1) 0.518 [0.516, 0.528]: one request on every thread is twice as fast
as on one stream of THROUGHPUT's split. The GRU at batch 1 is the one case THROUGHPUT wins (1.106
[1.058, 1.155] on 2 threads; 1.76 the day before), and at 1 thread the two tie (0.986 [0.896,
1.076]): THROUGHPUT's lone request runs on one stream of one thread, and a batch-1 GRU step is
faster on one thread than on two (0.71 vs 0.84 ms). That is the thread count's effect, which a
``--threads 1,2`` sweep shows for every backend alike, not the hint's, so LATENCY stays. A static
graph per batch shape against a dynamic batch dimension: 0.95-1.01 the day before (static kept).
"""

from __future__ import annotations

import openvino as ov

CORE = ov.Core()
DEVICE = "CPU"
#: the runtime's precision policy -> the CPU plugin's inference precision
PRECISION_HINT = {"fp32": "f32", "bf16": "bf16"}
#: the compiled model's properties the manifest reads back
READ_BACK = (
    "PERFORMANCE_HINT",
    "INFERENCE_PRECISION_HINT",
    "INFERENCE_NUM_THREADS",
    "NUM_STREAMS",
    "EXECUTION_MODE_HINT",
    "ENABLE_CPU_PINNING",
)


def available() -> tuple[bool, str]:
    """``import openvino`` worked and it has its CPU plugin."""
    if DEVICE not in CORE.available_devices:
        return False, f"OpenVINO has no CPU plugin here (devices: {CORE.available_devices})"
    return True, ""


def versions() -> dict[str, str]:
    """OpenVINO's version (the build string) and onnx's."""
    import onnx

    return {"openvino": ov.get_version(), "onnx": onnx.__version__}


def cuda_available() -> bool:
    """OpenVINO runs no CUDA device."""
    return False


def set_threads(n: int) -> int:
    """The CPU plugin's ``INFERENCE_NUM_THREADS``, read back."""
    CORE.set_property(DEVICE, {"INFERENCE_NUM_THREADS": int(n)})
    return int(CORE.get_property(DEVICE, "INFERENCE_NUM_THREADS"))


def set_tf32(enabled: bool, device: str) -> bool:
    """No TF32 on the CPU: always False."""
    return False


def bf16_capable() -> bool:
    """Whether the CPU plugin itself reports bfloat16 among its capabilities."""
    return "BF16" in CORE.get_property(DEVICE, "OPTIMIZATION_CAPABILITIES")


def compile_config(precision: str, threads: int) -> dict:
    """The hints every compile gets (module docstring)."""
    return {
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": PRECISION_HINT[precision],
        "INFERENCE_NUM_THREADS": int(threads),
        "EXECUTION_MODE_HINT": "PERFORMANCE",
    }


def settings_of(compiled) -> dict:
    """The settings a compiled model runs with, read back from it."""
    out = {}
    for key in READ_BACK:
        try:
            value = compiled.get_property(key)
        except RuntimeError:  # a property this plugin version does not report
            continue
        text = str(value).removeprefix("<Type: '").removesuffix("'>")
        out[key] = text.rsplit(".", 1)[-1]  # ExecutionMode.PERFORMANCE -> PERFORMANCE
    return out
