"""TensorFlow's process settings: Keras' backend, the thread pools, the device, TF32.

This is where Keras' engine is chosen (``keras_common.engine.select``: ``KERAS_BACKEND=tensorflow``
before ``keras`` is imported, or one line saying this process's Keras runs another engine) and
TensorFlow's log noise lowered. Importing this module imports
TensorFlow (the seconds of the runner's ``import_s``). Every setting is applied through
TensorFlow's own API and read back from it:

- **threads**: intra-op and inter-op pools both get ``n`` (``tf.config.threading``). TensorFlow
  fixes its pools when its eager context starts (the first op); the runner configures once per
  cell process, before anything runs. Where one process asks again for another count (the
  tests), the eager context is restarted so that the count asked for is the count in effect:
  models built before that are not to be used afterwards.
- **TF32**: TensorFlow allows TF32 for float32 matmuls and convolutions on Ampere+ GPUs by
  default; the suite's policy is off unless the runtime asks for it
  (``tf.config.experimental.enable_tensor_float_32_execution``), read back.
"""

from __future__ import annotations

import importlib.metadata
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO/WARNING lines

from rosetta.backends.keras_common.engine import select  # noqa: E402

keras = select("tensorflow", "tensorflow")  # Keras on TensorFlow, or one line why not
import tensorflow as tf  # noqa: E402
from tensorflow.python.eager import context  # noqa: E402  (the eager context's state)

tf.get_logger().setLevel("ERROR")


def available() -> tuple[bool, str]:
    """Usable once this module imported (TensorFlow and Keras with its TensorFlow backend)."""
    return True, ""


def versions() -> dict[str, str]:
    """TensorFlow, Keras, the installed distribution and the CUDA/cuDNN of the build."""
    build = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "keras": keras.__version__}
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            out["distribution"] = f"{dist} {importlib.metadata.version(dist)}"
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    if build.get("is_cuda_build"):
        out["cuda_build"] = f"CUDA {build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}"
    return out


def cuda_available() -> bool:
    """Whether TensorFlow sees a GPU (a CUDA build with a driver and a device)."""
    return bool(tf.config.list_physical_devices("GPU"))


def threads() -> tuple[int, int]:
    """``(intra-op, inter-op)`` threads TensorFlow's context holds (0: TensorFlow's default)."""
    return (
        tf.config.threading.get_intra_op_parallelism_threads(),
        tf.config.threading.get_inter_op_parallelism_threads(),
    )


def set_threads(n: int) -> int:
    """Size TensorFlow's intra-op and inter-op pools to ``n``; returns the intra-op count in
    effect, read back from TensorFlow's context (see the module docstring for a second call)."""
    if threads() == (n, n):
        return n
    if context.context()._initialized:  # pools already started with another count
        context._reset_context()  # TensorFlow's own test hook: a fresh, unstarted context
    tf.config.threading.set_intra_op_parallelism_threads(n)
    tf.config.threading.set_inter_op_parallelism_threads(n)
    return threads()[0]


def set_tf32(enabled: bool, device: str) -> bool:
    """Allow TF32 for float32 matmul/conv only when ``enabled`` on CUDA; returns what is in
    effect (always False on the CPU, where TF32 does not exist). The CUDA branch is written,
    not run: this machine has no GPU."""
    tf.config.experimental.enable_tensor_float_32_execution(bool(enabled and device == "cuda"))
    return device == "cuda" and tf.config.experimental.tensor_float_32_execution_enabled()


def tf_device(device: str) -> str:
    """The TensorFlow device string for a resolved rosetta device (``cpu`` | ``cuda``)."""
    return "/GPU:0" if device == "cuda" else "/CPU:0"


def device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)`` where TensorFlow reports one (written, not run)."""
    if device != "cuda":
        return "cpu"
    gpus = tf.config.list_physical_devices("GPU")
    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    return f"cuda ({details.get('device_name', 'GPU')})"
