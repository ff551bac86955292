"""TensorFlow and Keras, imported once, configured before any op runs.

This is the one place Keras' backend is chosen (``KERAS_BACKEND=tensorflow`` is set before
``keras`` is imported) and the one place TensorFlow's thread pools are sized from the runner's
single setting (``$ROSETTA_THREADS``): intra-op and inter-op both get ``N``. TensorFlow's own
log noise is lowered here too. Importing this module is what costs the seconds of ``import_s``.
"""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "tensorflow"  # before keras is imported, and nowhere else
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO/WARNING lines

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from rosetta.backends.base import threads_setting  # noqa: E402
from rosetta.errors import BackendError  # noqa: E402

if keras.backend.backend() != "tensorflow":
    raise ImportError(
        f"keras was imported with backend {keras.backend.backend()!r} before rosetta's "
        f"tensorflow backend could select 'tensorflow'; run this backend in its own process"
    )
tf.get_logger().setLevel("ERROR")


def _configure_threads() -> str:
    """Size TensorFlow's pools from ``$ROSETTA_THREADS``; returns what is in force, in words."""
    n = threads_setting()
    if n is not None:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(n)
            tf.config.threading.set_inter_op_parallelism_threads(n)
        except RuntimeError:  # the runtime already started in this process: report what holds
            pass
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    words = lambda k: str(k) if k else "default (all cores)"  # noqa: E731
    return f"intra-op {words(intra)}, inter-op {words(inter)}"


THREADS = _configure_threads()


def gpu_visible() -> bool:
    """Whether TensorFlow sees a GPU (a CUDA build with a driver and a device)."""
    return bool(tf.config.list_physical_devices("GPU"))


def tf_device(device: str) -> str:
    """The TensorFlow device string for a resolved rosetta device (``cpu`` | ``cuda``)."""
    if device == "cpu":
        return "/CPU:0"
    if device == "cuda":
        if not gpu_visible():
            raise BackendError(
                "backend 'tensorflow': device 'cuda' asked for, but TensorFlow sees no GPU "
                "(needs a CUDA build of tensorflow, a driver and a visible device)"
            )
        return "/GPU:0"
    raise BackendError(f"backend 'tensorflow' supports devices cpu and cuda, not {device!r}")


def device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)`` where TensorFlow reports one."""
    if device != "cuda":
        return "cpu"
    gpus = tf.config.list_physical_devices("GPU")
    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    return f"cuda ({details.get('device_name', 'GPU')})"
