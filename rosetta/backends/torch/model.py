"""A workload as a plain ``nn.Module`` with ``torch.optim``: the timed face and the NumPy face,
and the measured fast-path choices.

The timed face is what a PyTorch user writes: batches from a ``DataLoader`` already on the
device, ``zero_grad(set_to_none=True)``, forward, ``F.cross_entropy`` (mean), ``backward``,
``optimizer.step()``, the loss returned as a tensor (no host read-back); features under
``torch.inference_mode()``. The NumPy face converts only through ``weights.py`` and
``loader.py``. Everything the model needs comes from its :class:`~rosetta.runtime.Runtime`.

**Fast-path choices** (figures from ``python -m benchmarks fastpath_torch`` on the 2-core
development CPU, oneDNN/MKL, torch 2.13 CPU; rerun it before changing a choice):

- memory format, keyed by what the graph contains, never by workload name: *a graph with
  Conv2D runs channels_last (NHWC) on the CPU*, NCHW on CUDA (cuDNN's fp32 kernels' native
  layout); a graph without convolutions has no image layout to choose. Measured 2026-11-23 on
  the shared 2-core CPU, interleaved, ratio channels_last / NCHW (< 1: channels_last faster;
  load average 5-14, so absolute times are ~3x the quiet machine's):

  - cnn train step, batch 64: 0.659 [0.526, 0.928] (1.13 s vs 1.71 s), n=15;
  - resnet50 features, 32 x 224^2: 0.535 [0.411, 0.973] (17.7 s vs 33.0 s), n=5;

- ``torch.compile``, keyed by what the workload does, never by its name: *a forward-only
  workload (features) runs* ``torch.compile`` *(inductor) with freezing*; *a training workload
  runs eager*, and so do float64 (freezing's oneDNN convolutions have no float64 kernels) and
  the localiser's prefix cuts (task ``probe``): a rule of (task, dtype) in the Runtime
  (``compile_in_effect``, ``--torch-compile`` overrides),
  recorded with its reason in the manifest (``compile_reason``). Freezing folds the weights
  into the graph as constants (BatchNorm into the convolutions), which is only sound where the
  weights never change during the timed run, so it never applies to training, and
  ``set_params`` drops the compiled graphs (``torch._dynamo.reset()``) so that no frozen
  constant outlives the weights it was made from.
  Every batch shape compiles its own static graph (``dynamic=False``: the program measured);
  the compile lands in the cold start (first step) and, for the gate's and the latency's batch
  shapes, in ``gate_s`` and outside every clock. Measured (compile / eager, steady step,
  median [95% CI]; cold start eager / compiled):

  - resnet50 features, 32 x 224^2, inductor with freezing, quiet (load 1.3-1.5), n=5:
    **0.688 [0.650, 0.732]** (1.71 s vs 2.49 s); cold start 2.3 s / 31.2 s;
  - resnet50 without freezing, loaded (load 8-14): 0.762 [0.615, 1.107] (n=5);
  - cnn train step: 0.992 [0.775, 1.107] (n=15), cold start 9.1 s / 177.9 s (load 8-14);
  - gru train step: 0.923 [0.646, 1.316] (n=20; ``nn.GRU`` stays one op), 18.4 s / 21.0 s.

  Training gains nothing whose interval excludes 1 and pays minutes of inductor C++ builds.
  The switch is the backend's option ``compile`` (``default`` | ``on`` | ``off``, set by the
  runner from ``rosetta bench --torch-compile``; the default is a function of the task and the
  dtype, ``compile_in_effect``, and the manifest records the choice and
  why); the build option ``compile=True/False`` (``"aot_eager"`` or any ``torch.compile``
  backend name or callable picks that backend: the tests count compilations with one) wins
  over it, for benchmarks and tests;
- cuDNN autotune and TF32 are process settings (``runtime.py``); features run under
  ``torch.inference_mode()``.
- attention (a graph with an attention op): ``F.scaled_dot_product_attention`` by default,
  the op a PyTorch user calls; the build option ``attention="composed"`` lowers it from
  ``matmul``/``softmax`` instead (``lowering.ATTENTION_FORMS``), for ``python -m benchmarks
  fastpath_transformer``, which times the two (and ``torch.compile`` on/off) on the train step;
  the manifest records the form and why (``attention``, ``attention_reason``).

**The gated program.** ``train_step`` is the timed program and the gate's k steps run through
it: ``set_dropout(False)`` writes 0 into the rate buffer of every :class:`GatedDropout`, which
the same step reads (``lowering.py``). In eager mode that is literally the same Python and the
same kernels; under ``torch.compile`` the rates are graph inputs, so the one compiled forward
serves both (no retrace, no recompile; ``tests/test_backend_torch.py`` counts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rosetta.backends import driver
from rosetta.backends.base import Batch, Model, Params
from rosetta.backends.torch import loader as native
from rosetta.backends.torch import optim, weights
from rosetta.backends.torch import runtime as settings
from rosetta.backends.torch.lowering import (
    ATTENTION_DEFAULT,
    ATTENTION_FORMS,
    TABLE,
    Build,
    GatedDropout,
)
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.weights import check_weights
from rosetta.spec.workload import Workload

LAYOUTS = ("NCHW", "NHWC")
#: ops torch.autocast leaves in fp32 on the CPU although a user might expect bf16 (checked by
#: tests/test_precision.py): the GRU runs ATen's fp32 kernel, the embedding is a gather
AUTOCAST_FP32_ON_CPU = (nn.GRU, nn.Embedding)

CompileOption = bool | str | Callable | None


def compile_in_effect(setting: str, task: str, dtype: str) -> tuple[bool, str]:
    """Whether a torch build compiles its timed program (``torch.compile``), and why: ``on`` and
    ``off`` are the user's (``--torch-compile``); ``default`` compiles a forward-only (features)
    float32 program only. Training gains nothing measured and pays minutes of inductor builds
    (``rosetta/backends/torch/model.py``). Whatever the setting, a float64 build runs eager
    (inductor's freezing lowers convolutions to oneDNN's packed kernels, which have no float64
    form: ``BackendCompilerFailed ... Double``), and so do the localiser's cuts of the graph
    (task ``probe``: one model per op, a diagnosis never timed; compiling each would pay inductor
    per prefix and run into dynamo's recompile limit)."""
    if task == "probe":
        return False, f"task {task!r}: a diagnostic cut of the graph (the localiser's), not timed"
    if dtype == "float64":
        return False, "float64, which inductor freezing's oneDNN convolutions do not run"
    if setting == "on":
        return True, "asked for (torch_compile on)"
    if setting == "off":
        return False, "asked for (torch_compile off)"
    if task == "train":
        return False, "default: a training step runs eager (compiling gains nothing measured)"
    return True, "default: a forward-only float32 program compiles (inductor with freezing)"


def compile_backend(
    option: CompileOption, workload: Workload, runtime: Runtime
) -> tuple[str | Callable | None, str]:
    """The ``torch.compile`` backend to use (None: eager) and why: the build option if given
    (True: inductor, False: eager, a string or callable: that backend), else the runtime's
    option ``compile`` for this workload's task and the runtime's dtype
    (:func:`compile_in_effect`)."""
    if option is None:
        option, why = compile_in_effect(runtime.option("compile"), workload.task, runtime.dtype)
    else:
        why = "the build's compile option"
    if option is False:
        return None, why
    if option is True:
        return "inductor", why
    return option, why


def memory_format(workload: Workload, device: str, override: str | None) -> str:
    """``NHWC`` (channels_last) or ``NCHW`` for an image workload, by what its graph contains:
    a graph with Conv2D on the CPU runs channels_last (measured, module docstring); CUDA and
    convolution-free graphs run NCHW. ``override`` (a benchmark's ``layout``) wins."""
    if override is not None:
        if override not in LAYOUTS:
            raise BackendError(f"layout must be one of {', '.join(LAYOUTS)}, got {override!r}")
        return override
    if device == "cuda":
        return "NCHW"
    has_conv = any(
        isinstance(op, ops.Conv2D) for op, _, _ in walk(workload.graph, workload.input.shape)
    )
    return "NHWC" if has_conv else "NCHW"


def driver_has(workload: Workload, kind: type) -> bool:
    """Whether ``workload``'s graph (branches opened) holds an op of type ``kind``."""
    return any(isinstance(op, kind) for op, _, _ in walk(workload.graph, workload.input.shape))


class TorchModel(Model):
    """``workload`` lowered to ``torch.nn`` (``self.net``), trained with ``torch.optim``."""

    backend = "torch"

    def __init__(
        self,
        workload: Workload,
        params: Params,
        runtime: Runtime,
        *,
        compile: CompileOption = None,
        layout: str | None = None,
        attention: str | None = None,
    ) -> None:
        if runtime.dtype not in native.TORCH_DTYPES:
            raise BackendError(
                f"backend 'torch' supports float32 and float64, not {runtime.dtype!r}"
            )
        check_precision(runtime)
        self.workload = workload
        self.runtime = runtime
        self.autotune = settings.set_autotune(runtime.device)
        # the weights are canonical (set_params), so the seed drives the dropout masks: torch's
        # global generator, CPU and every CUDA device, as a user's script seeds it
        torch.manual_seed(runtime.seed)
        self.images = len(workload.input.shape) == 3
        self.layout = memory_format(workload, runtime.device, layout) if self.images else ""
        fmt = torch.channels_last if self.layout == "NHWC" else torch.contiguous_format
        dtype = native.TORCH_DTYPES[runtime.dtype]
        self.place = native.Placement(torch.device(runtime.device), dtype, fmt)

        self.attention, self.attention_reason = attention_form(attention)
        ctx = Build(attention=self.attention)
        net = driver.lower(TABLE, workload.graph, workload.input.shape, ctx)  # unknown op: raises
        self.net: nn.Module = net.to(device=self.place.device, dtype=dtype)
        if self.layout == "NHWC":
            self.net = self.net.to(memory_format=torch.channels_last)
        self.batchnorms = [
            m for m in self.net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
        ]
        self.dropouts = [m for m in self.net.modules() if isinstance(m, GatedDropout)]
        self.dropout = True
        self.binds = weights.bindings(ctx.owners)
        self.decoding = ctx.decoding  # generating: the position offset and the KV caches
        self.compile_backend, self.compile_reason = compile_backend(compile, workload, runtime)
        # freezing: inductor's, for forward-only workloads only (their weights never change
        # while timed), never in float64 (no float64 kernels for its frozen convolutions); each
        # batch shape compiles its own static graph
        self.freezing = (
            self.compile_backend == "inductor"
            and workload.task != "train"
            and runtime.dtype != "float64"
        )
        self.frozen_shapes: set[tuple] = set()  # shapes compiled with frozen weights
        if self.compile_backend is None:
            self.forward = self.net
        elif self.freezing:
            self.forward = torch.compile(self.net, backend="inductor", dynamic=False)
        else:
            self.forward = torch.compile(self.net, backend=self.compile_backend)
        # bf16: torch.autocast around forward (+ the logits' cast), fp32 master weights,
        # optimiser state and loss (the loss is computed from fp32 logits outside autocast)
        self.autocast = runtime.precision == "bf16"
        self._training: bool | None = None
        self._mode(False)
        self.optimizer: torch.optim.Optimizer | None = None
        self.set_params(params)

    # -- helpers -------------------------------------------------------------------------------
    def _mode(self, training: bool) -> None:
        """Dropout modules in training mode or not; BatchNorm stays in eval (the spec's
        inference-mode BatchNorm)."""
        if training != self._training:
            self.net.train(training)
            for bn in self.batchnorms:
                bn.eval()
            self._training = training

    def _compute(self):
        """The numeric policy around a forward: ``torch.autocast(bfloat16)`` for bf16, else
        nothing (fp32 computes in the parameters' dtype)."""
        if not self.autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.place.device.type, dtype=torch.bfloat16)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        """The forward under the numeric policy, as fp32 logits for the loss (mixed precision:
        the loss and everything after it stay fp32)."""
        with self._compute():
            out = self.forward(x)
        return out.float() if self.autocast else out

    def _trainable(self) -> None:
        if self.optimizer is None:
            raise BackendError(f"workload {self.workload.name!r} is forward-only")

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        return native.native_loader(x, y, order, batch_size, self.place)

    def train_step(self, batch: Batch) -> torch.Tensor:
        """One SGD/Adam step (the timed program; the gate runs it with dropout rates 0)."""
        self._trainable()
        self._mode(True)
        self.optimizer.zero_grad(set_to_none=True)
        loss = _cross_entropy(self._logits(batch[0]), batch[1])  # mean reduction
        loss.backward()
        self.optimizer.step()
        return loss.detach()  # the loss at the parameters before this step

    def predict(self, batch: Batch) -> torch.Tensor:
        self._mode(False)
        with torch.inference_mode(), self._compute(), self._freezing(batch[0]):
            return self.forward(batch[0])  # bf16 outputs under autocast (to_numpy casts)

    # -- generating face -----------------------------------------------------------------------
    GENERATES = True

    def prefill(self, prompts: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(np.asarray(prompts, dtype=np.int64), device=self.place.device)
        self.decoding.start(capacity=self.workload.input.shape[0])  # the model's context
        return self._generate_step(ids)

    def decode(self, tokens: torch.Tensor | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(tokens, dtype=torch.long, device=self.place.device)
        return self._generate_step(ids[:, None])  # (N,) -> (N, 1)

    def _generate_step(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The eager network over the positions after those seen, in inference mode."""
        self._mode(False)
        self.decoding.active = True
        try:
            with torch.inference_mode(), self._compute():
                out = self.net(ids)  # (N, t, V)
        finally:
            self.decoding.active = False
        self.decoding.offset += ids.shape[1]
        last = out[:, -1]  # (N, V): the logits at the newest position
        return last, last.argmax(dim=-1)

    def _freezing(self, x: torch.Tensor):
        """Inductor's freezing, switched on for this model's compiles only: around the first
        call of each batch shape (where a static graph compiles), nothing around later calls
        (the setting is process-wide; a training model's graphs must never freeze)."""
        if not self.freezing or tuple(x.shape) in self.frozen_shapes:
            return contextlib.nullcontext()
        from torch._inductor import config as inductor_config

        self.frozen_shapes.add(tuple(x.shape))
        return inductor_config.patch(freezing=True)

    def sync(self, value=None) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize(self.place.device)  # ran on an H200 (docs/gpu/)

    def to_numpy(self, value) -> np.ndarray:
        value = value.detach()
        if value.dtype == torch.bfloat16:  # NumPy has no bfloat16: exact widening to fp32
            value = value.float()
        return value.to("cpu").numpy()

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        check_weights(self.workload, params)
        weights.load(self.binds, params)
        if self.frozen_shapes:  # graphs holding the old weights as constants: compile again
            torch._dynamo.reset()  # process-wide; other compiled models only recompile
            self.frozen_shapes.clear()
        names = [n for n, b in self.binds.items() if b.trainable]
        trainable = [self.binds[n].tensor for n in names]
        # fresh state: loading weights restarts training
        self.optimizer = optim.make_optimizer(
            self.workload.optimizer, trainable, self.device, names
        )

    def get_params(self) -> Params:
        return weights.read(self.binds)

    def set_dropout(self, enabled: bool) -> None:
        """Write each dropout's rate (the spec's, or 0) into the buffer the step reads."""
        for d in self.dropouts:
            d.set_rate(d.spec_rate if enabled else 0.0)
        self.dropout = bool(enabled)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Loss and gradients through the timed forward (training mode, dropout rates 0)."""
        self._trainable()
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        was = self.dropout
        self.set_dropout(False)
        try:
            self._mode(True)
            self.optimizer.zero_grad(set_to_none=True)
            loss = _cross_entropy(self._logits(batch[0]), batch[1])
            loss.backward()
            grads = weights.read_grads(self.binds)
            self.optimizer.zero_grad(set_to_none=True)
        finally:
            self.set_dropout(was)
        return float(loss.item()), grads

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return native.to_canonical(batch)

    def summary(self) -> str:
        return str(self.net)

    def peak_device_memory_bytes(self) -> int | None:
        """Peak CUDA memory allocated by this process, or None on the CPU."""
        return settings.peak_memory_bytes(self.device)

    def reset_peak_device_memory(self) -> bool:
        return settings.reset_peak_memory(self.device)

    def manifest(self) -> dict:
        cuda = self.device == "cuda"
        has_gru = any(isinstance(m, nn.GRU) for m in self.net.modules())
        if not self.images:
            layout = "NTC (batch_first=True)"
        elif self.layout == "NHWC":
            layout = "NHWC (channels_last: the graph has Conv2D, on the CPU)"
        else:
            layout = "NCHW"
        if self.compile_backend is None:
            compiled, program = "eager", "the eager nn.Module step"
        else:
            name = getattr(self.compile_backend, "__name__", self.compile_backend)
            compiled = f"torch.compile (backend={name})"
            if self.freezing:
                compiled += (
                    ", inductor freezing (weights folded as constants), a static graph per "
                    "batch shape"
                )
            program = "the torch.compile'd forward (rates are graph inputs: no recompile)"
        if self.optimizer is None:
            gated = "n/a: forward only (the gate compares predict, the timed program itself)"
            if self.freezing:
                gated += "; compiled and frozen the same way, as a static graph of its own batch"
        else:
            gated = (
                f"TorchModel.train_step, {program}: the same zero_grad/forward/cross_entropy/"
                "backward/optimizer.step the timed loop calls, dropout off by writing 0 into "
                "every GatedDropout rate buffer (set_dropout)"
            )
        return {
            **self.runtime_manifest(),
            "device": settings.device_name(self.device),
            "device_reason": self.runtime.device_reason,
            "layout": layout,
            "interop_threads": settings.interop_threads(),
            "blas": settings.blas(),
            "precision_mode": precision_mode(self.runtime, self.net),
            "compile": compiled,
            "compile_reason": self.compile_reason,
            **self._attention_manifest(),
            "autotune": "cudnn.benchmark=True" if self.autotune else "n/a",
            "fused_rnn": _fused_rnn(cuda) if has_gru else "n/a",
            "loader": (
                "torch.utils.data.DataLoader(TensorDataset, batch sampler over the runner's "
                f"order, batch_size=None, num_workers={native.NUM_WORKERS}, "
                f"pin_memory={cuda}){', non_blocking copies one batch ahead' if cuda else ''}"
            ),
            "optimizer": optim.describe(self.optimizer),
            "dropout": "GatedDropout: inverted dropout, its rate a buffer the step reads",
            "features": "torch.inference_mode()",
            "gated_program": gated,
            "torch": torch.__version__,
        }

    def _attention_manifest(self) -> dict:
        """The attention form that ran and why ("n/a" without an attention op)."""
        if not driver_has(self.workload, ops.Attention):
            return {"attention": "n/a", "attention_reason": "n/a"}
        if self.attention == "sdpa":
            form = (
                "F.scaled_dot_product_attention, boolean key padding mask (PyTorch picks the "
                "kernel: flash/math on the CPU)"
            )
        else:
            form = (
                "composed: torch.matmul q k^T / sqrt(d), masked_fill(finfo.min), torch.softmax, "
                "torch.matmul with v; rows without a real key zeroed"
            )
        return {"attention": form, "attention_reason": self.attention_reason}


def attention_form(option: str | None) -> tuple[str, str]:
    """The attention form to lower (``lowering.ATTENTION_FORMS``) and why: the build option if
    given (benchmarks), else the default, PyTorch's own fused op."""
    if option is None:
        return ATTENTION_DEFAULT, (
            "default: F.scaled_dot_product_attention, the op a PyTorch user calls; python -m "
            "benchmarks fastpath_transformer times it against the composed form"
        )
    if option not in ATTENTION_FORMS:
        raise BackendError(
            f"backend 'torch': attention={option!r}; valid: {', '.join(ATTENTION_FORMS)}"
        )
    return option, "the build's attention option"


def check_precision(runtime: Runtime) -> None:
    """Refuse a numeric policy this backend cannot honour here (one line naming the fix)."""
    if runtime.precision == "fp32":
        return
    if runtime.precision != "bf16":
        raise BackendError(
            f"backend 'torch' runs precisions fp32 and bf16, not {runtime.precision!r}"
        )
    if runtime.dtype != "float32":
        raise BackendError(
            f"precision bf16 keeps float32 master weights; got dtype {runtime.dtype!r} "
            "(use --dtype float32)"
        )
    if runtime.device == "cuda" and not torch.cuda.is_bf16_supported():  # written, not run here
        raise BackendError("precision bf16: this CUDA GPU has no bfloat16 support; use fp32")


def precision_mode(runtime: Runtime, net: nn.Module) -> str:
    """What the numeric policy ran as, in words (the manifest's ``precision_mode``)."""
    if runtime.precision != "bf16":
        return f"{runtime.precision}: {runtime.dtype} throughout"
    kept = sorted({type(m).__name__ for m in net.modules() if isinstance(m, AUTOCAST_FP32_ON_CPU)})
    on_cpu = runtime.device == "cpu"
    extra = ""
    if kept and on_cpu:
        extra = f"; {', '.join(kept)} stay fp32 (not on CPU autocast's bf16 list)"
    return (
        f"bf16 (torch.autocast bfloat16 on {runtime.device}: conv/linear/matmul in bf16; fp32 "
        f"master weights, optimiser state and loss{extra})"
    )


def _fused_rnn(cuda: bool) -> str:
    if cuda and torch.backends.cudnn.is_available():
        return "yes: nn.GRU -> cuDNN fused GRU"
    return "yes: nn.GRU -> ATen's C++ GRU (one op over all steps, no Python loop)"


def build(
    workload: Workload,
    params: Params,
    runtime: Runtime,
    *,
    compile: CompileOption = None,
    layout: str | None = None,
    attention: str | None = None,
) -> TorchModel:
    """Lower ``workload`` to an ``nn.Module`` holding ``params`` (canonical), under ``runtime``.

    Options (benchmarks only; the runner passes none): ``compile`` (default: the Runtime's
    option ``compile`` for the task and dtype) wraps the module in ``torch.compile``; ``layout``
    (``NCHW``/``NHWC``) overrides the memory format the graph rule picks; ``attention``
    (``sdpa``/``composed``, default ``sdpa``) the form of every attention op."""
    return TorchModel(
        workload, params, runtime, compile=compile, layout=layout, attention=attention
    )


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``F.cross_entropy``, mean over every row: a language model's (N, T, K) logits and (N, T)
    labels as N*T rows (a classifier's (N, K) and (N,) pass unchanged)."""
    return F.cross_entropy(logits.flatten(0, -2), labels.flatten())
