"""Paddle Inference: the forward-only fast path Paddle documents for deployment on the CPU.

A forward-only workload (no optimiser: ResNet-50's features, an imported model) is what Paddle's
deployment guide runs through Paddle Inference, not the dynamic graph: the network saved as a
static program (``paddle.jit.save`` with an ``InputSpec``), loaded by
``paddle.inference.create_predictor`` with oneDNN on (``Config.enable_mkldnn``: oneDNN's fused
convolution, batch-norm and ReLU kernels in place of the dynamic graph's im2col + GEMM phi
kernels, which ``FLAGS_use_onednn`` does not reach) and the backend's thread count
(``set_cpu_math_library_num_threads``). Measured quiet on a 2-core Zen 4 (``python -m benchmarks
fastpath_knob --backend paddle --knob predictor --values inference,dygraph --workloads
resnet50``: 32 images at 224^2, interleaved in one process, load 1.3-1.5): the dynamic graph
10.23 s a batch, the predictor 1.62 s, dygraph / inference 6.32 [6.07, 6.57]; its cold start
(export, IR passes, first batch) 4.8 s against the dynamic graph's 6.8 s. A prototype at 112^2,
batch 8: the predictor without oneDNN 448 ms against the dynamic graph's 449 ms, so oneDNN is
the gain. Outputs within 7e-7 relative of the dynamic graph's. The predictor
holds a snapshot of the weights: :class:`Predictor` is rebuilt after every ``set_params``.

Where it does not apply the model keeps the dynamic graph, and says why (:func:`in_effect`):
training workloads (the predictor cannot step an optimiser, and a training workload's predict
must see the weights as they are trained), float64 (oneDNN's kernels are float32), devices other
than the CPU (a GPU predictor is not written), the localiser's probe cuts, and a network
``paddle.jit.save`` cannot translate (its error is the reason: :func:`export_failed`).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from rosetta.backends.paddle.compat import paddle

SETTING_VALUES = ("default", "inference", "dygraph")


def in_effect(setting: str, task: str, dtype: str, device: str) -> tuple[bool, str]:
    """Whether predict runs through Paddle Inference, and why (``setting``: the backend's
    option ``predictor``)."""
    if setting == "dygraph":
        return False, "asked for (paddle.predictor=dygraph)"
    if task != "features":
        why = "the dynamic graph: a training workload's predict sees the weights as trained"
        return False, why if task == "train" else f"task {task!r}: the dynamic graph"
    if dtype != "float32":
        return False, f"the dynamic graph: {dtype} (Paddle Inference's oneDNN kernels are float32)"
    if device != "cpu":
        return False, f"the dynamic graph on {device} (a GPU predictor is not written)"
    if setting == "inference":
        return True, "asked for (paddle.predictor=inference)"
    return True, (
        "default for forward-only float32 on the CPU: Paddle Inference with oneDNN, Paddle's "
        "deployment path; ResNet-50 32 x 224^2 on a 2-core Zen 4, interleaved, quiet: "
        "dynamic graph / predictor 6.32 [6.07, 6.57] (10.23 s against 1.62 s a batch; "
        "benchmarks fastpath_knob --knob predictor)"
    )


def export_failed(exc: Exception) -> str:
    """The reason a model keeps the dynamic graph when Paddle cannot export its network."""
    first = (str(exc).strip().splitlines() or [""])[-1].strip()[:200]
    return (f"the dynamic graph: paddle.jit.save could not translate this network for Paddle "
            f"Inference ({type(exc).__name__}: {first})")  # fmt: skip


class Predictor:
    """``net`` (eval mode) saved as a static program and run by a Paddle Inference predictor."""

    def __init__(self, net, input_shape: tuple[int, ...], input_dtype: str, threads: int) -> None:
        spec = [paddle.static.InputSpec([None, *input_shape], input_dtype, name="x")]
        with tempfile.TemporaryDirectory(prefix="rosetta-paddle-") as tmp:
            prefix = os.path.join(tmp, "model")
            paddle.jit.save(net, prefix, input_spec=spec)  # the program and its parameters
            program = next(f for f in os.listdir(tmp) if f.endswith((".json", ".pdmodel")))
            config = paddle.inference.Config(os.path.join(tmp, program), prefix + ".pdiparams")
            config.disable_gpu()
            config.enable_mkldnn()
            config.set_cpu_math_library_num_threads(threads)
            config.disable_glog_info()
            self.predictor = paddle.inference.create_predictor(config)  # reads the files now
        self.config = config
        self.input = self.predictor.get_input_handle(self.predictor.get_input_names()[0])
        self.output = self.predictor.get_output_handle(self.predictor.get_output_names()[0])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.input.copy_from_cpu(np.ascontiguousarray(x))
        self.predictor.run()
        return self.output.copy_to_cpu()

    def settings(self) -> str:
        """The predictor's settings, read back from its config."""
        return (
            f"paddle.inference.create_predictor of the paddle.jit.save program: oneDNN "
            f"{'on' if self.config.mkldnn_enabled() else 'off'}, "
            f"{self.config.cpu_math_library_num_threads()} math-library threads, "
            f"IR optimisation {'on' if self.config.ir_optim() else 'off'}"
        )
