"""Keras' engine, chosen once per process: the one place a Keras backend selects it.

Keras 3 reads ``KERAS_BACKEND`` once, when ``keras`` is first imported, and keeps that engine for
the life of the process (``keras.config.set_backend`` reloads the package and leaves every
object made before it unusable: not something a benchmark may do behind a model's back). So the
engine is a setting of the *process*: each Keras backend's ``runtime.py`` calls :func:`select`
before anything else imports ``keras``, and a process whose Keras already runs another engine
gets :class:`EngineConflict`, one line naming both engines and the fix, instead of a model that
silently computes on the wrong engine. A cell is one process (``rosetta bench``), so every cell
gets the engine its backend names; the test suite runs each Keras engine's conformance checks in
a process of its own (``tests/conformance/engine_process.py``).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from rosetta.errors import BackendError


class EngineConflict(BackendError, ImportError):
    """Keras was imported on another engine in this process. An ``ImportError`` too, so that a
    backend's ``available()`` reports it as the reason the backend cannot run here."""


def imported_engine() -> str | None:
    """The engine of the ``keras`` this process imported, or ``None`` before any import."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    try:
        return str(keras.backend.backend())
    except AttributeError:  # a half-imported keras (an import that failed part way)
        return os.environ.get("KERAS_BACKEND")


def select(engine: str, backend: str) -> ModuleType:
    """Import ``keras`` on ``engine`` (``tensorflow`` | ``jax`` | ``torch``) for backend
    ``backend`` and return it; :class:`EngineConflict` where this process's Keras already runs
    another engine."""
    held = imported_engine()
    if held is None:
        os.environ["KERAS_BACKEND"] = engine  # read by keras at its import, and nowhere else
        import keras

        held = str(keras.backend.backend())
    if held != engine:
        raise EngineConflict(
            f"backend {backend!r} runs Keras on {engine}, but this process imported Keras on "
            f"{held} already (Keras picks its engine once per process); run {backend!r} in a "
            "process of its own, as rosetta bench does (one process per cell)"
        )
    import keras

    return keras


#: what a float64 model's manifest says of the one Keras setting below
FLOAT64_NOTE = (
    "Keras' type promotion narrows float64 to float32 on its JAX and PyTorch engines "
    "(keras/src/backend/common/dtypes.py, BIT64_TO_BIT32_DTYPE, 'aligned with JAX's default'): "
    "a float64 Dense would multiply in float32. This process lets float64 promote to float64 "
    "(the engine runs it natively; JAX inside jax.enable_x64), which changes nothing for float32 "
    "models (no float64 operand reaches their ops)"
)


def keep_float64() -> None:
    """Let Keras' type promotion keep float64 as float64 in this process (see
    ``FLOAT64_NOTE``); one line where this Keras has no such table (then float64 cannot run)."""
    from keras.src.backend.common import dtypes

    table = getattr(dtypes, "BIT64_TO_BIT32_DTYPE", None)
    if not isinstance(table, dict) or "float64" not in table:
        raise BackendError(
            "this Keras version has no BIT64_TO_BIT32_DTYPE table to keep float64 as float64 on "
            "its JAX/PyTorch engines; run --dtype float32, or the tensorflow backend for float64"
        )
    table["float64"] = "float64"


def step_in_effect(setting: str, engine: str, device: str = "cpu") -> tuple[str, str]:
    """``(keras | custom, why)`` for the Runtime's ``keras_step`` on ``engine`` (``jax`` |
    ``torch``) and ``device``: the default is the measured one where it was measured (Keras' own
    ``train_on_batch`` on PyTorch on the CPU), else ``custom``, for the reasons
    ``keras_common/model.py`` gives."""
    if setting in ("keras", "custom"):
        return setting, f"asked for (keras_step {setting})"
    if engine == "torch" and device == "cpu":
        return "keras", (
            "default on PyTorch on the CPU: Keras' own train_on_batch, measured as fast or faster "
            "than the custom step (keras/custom: cnn 0.890 [0.867, 0.926] and 0.971 [0.920, "
            "1.013], gru 1.026 [0.979, 1.063] and 0.942 [0.903, 0.991]; benchmarks/fastpath_knob, "
            "Zen 4, 2026-11-25); its per-call read-back of the loss is no device sync on the CPU"
        )
    if engine == "jax":
        why = (
            "default on JAX: a jitted stateless step keeps the state on the device between steps; "
            "train_on_batch writes every variable back and reads the loss to the host per call "
            "(on the CPU the two measured level: keras/custom cnn 1.003 [0.969, 1.027], gru "
            "0.986 [0.961, 1.003]; benchmarks/fastpath_knob, Zen 4, 2026-11-25)"
        )
    else:
        why = (
            "default on PyTorch on a GPU: Keras' own TorchTrainer.train_step (forward, backward, "
            "optimizer.apply) without its per-call metric updates and host read-back of the loss "
            "(a device sync per step on CUDA; written, not run here)"
        )
    return "custom", why
