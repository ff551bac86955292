"""The exported graph in an ONNX Runtime ``InferenceSession``: the forward-only ``Model``.

Everything but the session lives in :class:`rosetta.export.serving.ServingModel`; here the
session is made with ``runtime.session_options`` (the fast path) and read back for the manifest.
Generating, the generation graph gets a session of its own with the same options (its N, T and
the cache length S dynamic: one session serves the prefill and every decode step).
"""

from __future__ import annotations

import numpy as np
import onnx

from rosetta.backends.onnxruntime import runtime as settings
from rosetta.export.graph import INPUT
from rosetta.export.serving import ServingModel
from rosetta.runtime import Runtime


class OrtModel(ServingModel):
    """``workload``'s ONNX export run by ONNX Runtime (CPU execution provider)."""

    backend = "onnxruntime"
    engine = "ONNX Runtime (CPUExecutionProvider)"
    why_float32 = "its CPU execution provider has no float64 Conv or GRU kernel"

    def _compile(self, model: onnx.ModelProto) -> None:
        self.session = settings.session(model.SerializeToString(), self.runtime.threads or 1)

    def _run(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(None, {INPUT: x})[0]

    def _compile_generation(self, model: onnx.ModelProto) -> None:
        self.gen_session = settings.session(model.SerializeToString(), self.runtime.threads or 1)
        self.gen_outputs = [o.name for o in self.gen_session.get_outputs()]

    def _run_generation(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.gen_outputs, self.gen_session.run(None, feeds), strict=True))

    def engine_settings(self) -> dict:
        return settings.settings_of(self.session)

    def manifest(self) -> dict:
        return {**super().manifest(), "onnxruntime": settings.versions()["onnxruntime"]}


def build(workload, params, runtime: Runtime, *, onnx_file=None) -> OrtModel:
    """``workload``'s export holding ``params`` (canonical) in a session under ``runtime``;
    ``onnx_file``: run that ``.onnx`` file instead (checked to be an export of ``workload``)."""
    return OrtModel(workload, params, runtime, onnx_file=onnx_file)
