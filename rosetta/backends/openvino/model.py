"""The exported graph compiled by OpenVINO's CPU plugin: the forward-only ``Model``.

Everything but the compiled model lives in :class:`rosetta.export.serving.ServingModel`. The
graph is read once (``Core.read_model`` of the serialised ONNX), and compiled as one static graph
per batch shape on first use (``runtime.compile_config``: the hints); each shape keeps its
compiled model and one ``InferRequest``. Generating, the generation graph is compiled once with
its N, T and cache length S dynamic (one static graph per step would recompile at every token),
in the plain form: the caches are inputs and outputs, handed back to the host at each step
(OpenVINO's stateful form, the cache kept in the plugin's variables, is not used).
"""

from __future__ import annotations

import io

import numpy as np
import onnx

from rosetta.backends.openvino import runtime as settings
from rosetta.errors import BackendError
from rosetta.export.graph import INPUT
from rosetta.export.serving import ServingModel
from rosetta.runtime import Runtime


class OpenVinoModel(ServingModel):
    """``workload``'s ONNX export compiled by OpenVINO for the CPU."""

    backend = "openvino"
    engine = "OpenVINO (CPU plugin)"
    why_float32 = "its CPU plugin computes a float64 graph in f32, measured 8.6e-7 relative"

    def _compile(self, model: onnx.ModelProto) -> None:
        if self.runtime.precision == "bf16" and not settings.bf16_capable():
            raise BackendError(
                "backend 'openvino': precision bf16, but the CPU plugin reports no BF16 "
                "capability here; run it with --precisions fp32"
            )
        self.read = settings.CORE.read_model(io.BytesIO(model.SerializeToString()))
        self.config = settings.compile_config(self.runtime.precision, self.runtime.threads or 1)
        self.compiled: dict[tuple, tuple] = {}  # batch shape -> (compiled model, request)

    def _request(self, shape: tuple):
        if shape not in self.compiled:
            static = self.read.clone()
            static.reshape({INPUT: list(shape)})
            compiled = settings.CORE.compile_model(static, settings.DEVICE, self.config)
            self.compiled[shape] = (compiled, compiled.create_infer_request())
        return self.compiled[shape][1]

    def _run(self, x: np.ndarray) -> np.ndarray:
        return self._request(tuple(x.shape)).infer({0: x})[0]

    def _compile_generation(self, model: onnx.ModelProto) -> None:
        read = settings.CORE.read_model(io.BytesIO(model.SerializeToString()))
        compiled = settings.CORE.compile_model(read, settings.DEVICE, self.config)
        self.gen_request = compiled.create_infer_request()
        self.gen_outputs = [o.get_any_name() for o in compiled.outputs]

    def _run_generation(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # share_outputs=False (the default): copies, which the next step's run cannot overwrite
        results = self.gen_request.infer(feeds)
        return {name: results[name] for name in self.gen_outputs}

    def engine_settings(self) -> dict:
        if not self.compiled:  # nothing run yet: the batch-1 graph says what every one gets
            self._request((1, *self.workload.input.shape))
        compiled = next(iter(self.compiled.values()))[0]
        return {**settings.settings_of(compiled), "graph": "static, one compile per batch shape"}

    def manifest(self) -> dict:
        return {**super().manifest(), "openvino": settings.versions()["openvino"]}


def build(workload, params, runtime: Runtime, *, onnx_file=None) -> OpenVinoModel:
    """``workload``'s export holding ``params`` (canonical) compiled under ``runtime``;
    ``onnx_file``: run that ``.onnx`` file instead (checked to be an export of ``workload``)."""
    return OpenVinoModel(workload, params, runtime, onnx_file=onnx_file)
