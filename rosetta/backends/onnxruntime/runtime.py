"""ONNX Runtime's process settings and its fast path (the session options every session gets).

ONNX Runtime has no process-wide pools: each ``InferenceSession`` sizes its own from its
``SessionOptions``. ``set_threads(n)`` therefore records ``n`` for the sessions this process
makes, and the manifest reads the options back from each session. The fast path
(:func:`session_options`), the engine's documented defaults for a CPU server made explicit:

- ``graph_optimization_level = ORT_ENABLE_ALL``: constant folding, Conv+BatchNorm and
  Conv+Relu fusion, the NCHWc layout transformer for the MLAS convolutions (the default of the
  Python API; stated so that the manifest says it);
- ``intra_op_num_threads = n`` (the cell's threads: the calling thread and n - 1 pool threads),
  ``inter_op_num_threads = 1`` with ``execution_mode = ORT_SEQUENTIAL``: the graphs are chains
  (a ResNet block has two branches of very unequal cost), so a parallel executor would add a
  pool competing for the same cores and nothing to run on it;
- ``session.intra_op.allow_spinning = 1`` (the default): pool threads spin between the ops of
  one run instead of sleeping, which a dedicated benchmark machine affords.

Measured (``python -m benchmarks fastpath_engines --only ort_level``, one forward pass of the
export, interleaved pairs, alone on a 2-core AMD EPYC Zen 4 (avx512f, avx512_bf16), 2026-11-25;
ratio ENABLE_ALL / ENABLE_EXTENDED, < 1: ENABLE_ALL faster): ResNet-50 (112 px) at batch 1
**0.877 [0.808, 0.961]**, the CNN at batch 64 1.025 [0.992, 1.130] (the day before: 1.14 [1.05,
1.19]: within a run's noise on that small net) and at batch 1 0.729 [0.269, 2.501], the GRU 1.019
[0.961, 1.067] (batch 1) and 1.074 [0.870, 1.284] (batch 64). ENABLE_ALL stays: it wins where the
convolutions are large and is level elsewhere. The sequential executor with one inter-op
thread against the parallel one with two: 0.39 (CNN, batch 1), 0.82 (batch 64), 0.06 (GRU,
batch 1), 0.84 (batch 64) the day before, so it stays too.
"""

from __future__ import annotations

import onnx
import onnxruntime as ort

_THREADS: dict[str, int] = {}
#: the execution provider every session uses
PROVIDER = "CPUExecutionProvider"


def available() -> tuple[bool, str]:
    """``import onnxruntime`` worked and it has its CPU execution provider."""
    if PROVIDER not in ort.get_available_providers():
        return False, f"onnxruntime has no {PROVIDER} ({ort.get_available_providers()})"
    return True, ""


def versions() -> dict[str, str]:
    """ONNX Runtime's and onnx's versions."""
    return {"onnxruntime": ort.__version__, "onnx": onnx.__version__}


def cuda_available() -> bool:
    """Whether this ONNX Runtime build has the CUDA provider (the backend uses the CPU one)."""
    return "CUDAExecutionProvider" in ort.get_available_providers()


def set_threads(n: int) -> int:
    """Record ``n`` intra-op threads for this process's sessions; returns it (each session's
    options are read back into the manifest)."""
    _THREADS["intra"] = int(n)
    return int(n)


def set_tf32(enabled: bool, device: str) -> bool:
    """No TF32 on the CPU: always False."""
    return False


def session_options(threads: int) -> ort.SessionOptions:
    """The fast-path options of every session (module docstring)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    so.log_severity_level = 3  # errors only: a session's warnings are not the cell's output
    return so


def session(model_bytes: bytes, threads: int) -> ort.InferenceSession:
    """An ``InferenceSession`` of a serialised ONNX model with the fast-path options."""
    return ort.InferenceSession(model_bytes, session_options(threads), providers=[PROVIDER])


def settings_of(sess: ort.InferenceSession) -> dict:
    """The settings a session runs with, read back from its options."""
    so = sess.get_session_options()
    return {
        "graph_optimization_level": str(so.graph_optimization_level).rsplit(".", 1)[-1],
        "intra_op_num_threads": int(so.intra_op_num_threads),
        "inter_op_num_threads": int(so.inter_op_num_threads),
        "execution_mode": str(so.execution_mode).rsplit(".", 1)[-1],
        "allow_spinning": so.get_session_config_entry("session.intra_op.allow_spinning"),
        "providers": ",".join(sess.get_providers()),
    }
