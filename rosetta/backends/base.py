"""The backend contract, v3: the names every backend exposes (the Keras 3 lesson).

**A backend is one folder with the same files as the others** (``MODULES``):

- ``__init__.py``: the constants ``NAME``, ``DEVICES``, ``DTYPES``, ``PRECISIONS`` and the entry
  points, made once for every backend by :class:`BackendAPI` (nothing else);
- ``runtime.py``: the process settings: ``available()``, ``versions()``, ``cuda_available()``,
  ``set_threads(n) -> int`` and ``set_tf32(enabled, device) -> bool``, each returning what is
  *in effect*, read back from the framework;
- ``ops/``: one module per op it lowers, ``ops/<op>.py`` named for the op, holding its native
  ``build(op, site, ctx)``, its ``render(op, site, ctx)`` (the same layer as source text) and
  its weight mapping side by side, importing no framework at its top; ``ops/__init__.py``
  declares ``UNSUPPORTED = {op: reason}`` (``rosetta.backends.driver.discover``: a gap is
  declared, never silent);
- ``lowering.py``: ``TABLE``, the native face of the op table (op -> native layer, one
  signature; it holds the build context, the layers several ops share, ``sequence`` and
  ``residual``), and ``apply_op(op, x, runtime, training)`` for one parameter-free op;
- ``weights.py``: the bound weights of a built model, loaded and read in canonical layout
  through each op module's weight mapping, and nothing else;
- ``loader.py``: the framework's own input machinery;
- ``optim.py``: the optimiser as the spec states it;
- ``model.py``: the :class:`Model` with its two faces and ``build(workload, params, runtime)``;
- ``source.py``: ``OPS``, the op table found from ``ops/`` (``discover``), and ``RENDER``, its
  text face (``rosetta code``; text only, no framework import).

What the rest of Rosetta reads of a backend are constants of this folder: ``PAGE_NAME``,
``COLOUR`` and ``GEMM_PROBE`` in ``__init__.py`` (``rosetta.backends.constant``) and the
generated file's template, ``codegen.py`` (optional: the serving engines write none). A backend
may add files of its own (the reference's op kernels, Chainer's NumPy-2 layer).

**The entry points** (``CONTRACT``): ``available() -> (bool, why)``, ``versions() -> dict``,
``cuda_available() -> bool``, ``configure(request: Runtime) -> Runtime`` (threads first, then
the device, then the numeric policy; returns the runtime in effect, see ``rosetta.runtime``),
``build(workload, params, runtime, **options) -> Model`` and ``run_op(op, x, runtime, *,
training=False) -> np.ndarray`` (one parameter-free op through the backend's own table, NumPy in
and out: the op-level conformance tests and the dropout check). ``options`` are a backend's own
fast-path overrides (torch's ``compile``/``layout``), for benchmarks; the runner never passes any.

A ``Model`` has two faces.

**The timed face** speaks the framework's own values. ``loader(x, y, order, batch_size)`` is
built on the framework's input machinery (``DataLoader``, ``tf.data``, a device-prefetching
iterator, Chainer's iterators) and yields *native batches*: tuples ``(x, y)`` (or ``(x,)``
without labels) already on the device and in the backend's layout, taking the samples of
``order`` in that order, complete batches only. ``train_step(batch)`` returns the loss as a
native scalar (nothing is read back to the host), ``predict(batch)`` returns native outputs,
``sync(value=None)`` waits for queued device work (on ``value`` where the framework needs an
array to block on), and ``to_numpy(value)`` is the one explicit way back to NumPy.

**The NumPy face** serves the equivalence gate and the tests, always in canonical names and
layouts: ``set_params``/``get_params`` (which is exact: a round trip returns the same bits),
``loss_and_grads(x, y)`` and ``deterministic_steps(x, y, k)`` (k optimiser steps on one batch
with dropout off), both with dropout off, ``batch_to_numpy(batch)`` (a native batch back in
canonical layout) and ``predict_numpy(x)``, whose outputs ``output_to_canonical`` turns back to
the canonical layout of the graph's last op (the identity for a full workload's logits or
features; what makes each prefix the localiser cuts comparable). ``set_params`` also resets
the optimiser state: loading weights starts training afresh. ``manifest()`` says which fast
path ran (``MANIFEST_KEYS``).

Layout conversions happen in the op modules' weight mappings (through ``weights.py``'s
``set_params``/``get_params``), the loader and ``Model.output_to_canonical`` (activations, in
``model.py``), nowhere else. An op a backend cannot lower raises
``rosetta.errors.BackendError`` naming the backend, the op and the reason it declares
(``driver.unsupported``).
"""

from __future__ import annotations

import importlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np

from rosetta.backends.driver import unsupported
from rosetta.errors import BackendError
from rosetta.runtime import CUDA_ONLY_PRECISIONS, MIXED_PRECISIONS, Runtime, check_precision
from rosetta.spec import ops

Params = dict[str, np.ndarray]
Batch = tuple[Any, ...]  # a native batch: (x, y) or (x,), framework arrays on the device

#: module-level names every backend package defines
CONTRACT = (
    "NAME",
    "DEVICES",
    "DTYPES",
    "PRECISIONS",
    "available",
    "versions",
    "cuda_available",
    "configure",
    "build",
    "run_op",
)
#: the files of every backend folder, and the names (with their parameters) each must define
MODULES: dict[str, dict[str, tuple[str, ...] | None]] = {
    "runtime": {
        "available": (),
        "versions": (),
        "cuda_available": (),
        "set_threads": ("n",),
        "set_tf32": ("enabled", "device"),
    },
    "lowering": {"TABLE": None, "apply_op": ("op", "x", "runtime", "training")},
    "weights": {},
    "loader": {},
    "optim": {},
    "model": {"build": ("workload", "params", "runtime")},
    "source": {"RENDER": None},  # the same table rendered as source text (rosetta.codegen)
}
#: keys every ``Model.manifest()`` has (values may be "n/a" where a key does not apply)
MANIFEST_KEYS = (
    "backend",
    "device",  # "cpu" | "cuda" (+ device name where known)
    "dtype",
    "precision",  # the numeric policy in effect (rosetta.runtime.PRECISIONS)
    "tf32",  # bool: TF32 allowed for fp32 matmul/conv (False on the CPU)
    "layout",  # e.g. "NCHW", "NHWC", "TNC" (time-major), "NTC"
    "threads",  # int: intra-op threads in effect, read back from the framework
    "compile",  # eager | jit | tf.function | tf.function+xla | torch.compile ...
    "autotune",  # cuDNN autotune on/off, or "n/a" on CPU
    "fused_rnn",  # whether the GRU runs the framework's fused kernel ("n/a" without a GRU)
    "loader",  # the input machinery that feeds the timed face
    "optimizer",  # the optimiser implementation and any deviation from the framework default
    "gated_program",  # which compiled function/trace/executable the gate's k steps ran through
)
#: the ops ``run_op`` must accept (they own no parameters)
PARAM_FREE_OPS = (ops.ReLU, ops.MaxPool2D, ops.Dropout, ops.Flatten, ops.GlobalAvgPool)


class Model(ABC):
    """A workload built by one backend (see the module docstring for the two faces)."""

    backend: str
    runtime: Runtime

    @property
    def dtype(self) -> str:
        """The model's dtype (from its runtime)."""
        return self.runtime.dtype

    @property
    def device(self) -> str:
        """The resolved device (from its runtime)."""
        return self.runtime.device

    # -- the timed face: native values ---------------------------------------------------------
    @abstractmethod
    def loader(
        self, x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int
    ) -> Iterable[Batch]:
        """Native batches of ``x[order]`` (and ``y[order]``), complete batches only, in order.

        ``x`` is in canonical layout (images ``(N, C, H, W)`` float32, token ids ``(N, T)``
        int32), ``y`` integer labels ``(N,)`` or ``None``. Each batch is on the model's device
        and in its layout, ready for ``train_step``/``predict``."""

    @abstractmethod
    def train_step(self, batch: Batch) -> Any:
        """One optimiser step in training mode (dropout on); returns the loss, a native scalar."""

    @abstractmethod
    def predict(self, batch: Batch) -> Any:
        """Forward pass on ``batch[0]`` in evaluation mode; native outputs ``(N, ...)``."""

    def sync(self, value: Any = None) -> None:
        """Block until queued device work (or the computation of ``value``) is done."""
        return None  # synchronous CPU backends

    @abstractmethod
    def to_numpy(self, value: Any) -> np.ndarray:
        """A native value (loss, outputs) as a NumPy array: the one explicit host crossing."""

    # -- the NumPy face: canonical names and layouts ------------------------------------------
    @abstractmethod
    def set_params(self, params: Params) -> None:
        """Load canonical-named NumPy arrays (parameters and buffers); resets optimiser state."""

    @abstractmethod
    def get_params(self) -> Params:
        """Every parameter and buffer as canonical-named NumPy arrays."""

    @abstractmethod
    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Loss and the gradient of every trainable parameter by canonical name, dropout off."""

    @abstractmethod
    def set_dropout(self, enabled: bool) -> None:
        """Switch dropout on or off *inside the timed program* (a runtime input of the same
        compiled step, a rate or keep flag, not a second trace), so the gate checks what is
        timed. Timed runs leave it on; ``deterministic_steps`` turns it off for its k steps."""

    def gated_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> tuple[list[float], Params]:
        """``k`` optimiser steps on batch ``(x, y)`` through ``train_step`` itself (the timed
        program, fed by the native loader) with dropout off, continuing from the current
        parameters and optimiser state: the losses each step returned (the first is the loss at
        the starting parameters) and ``get_params()`` afterwards. What the gate checks."""
        batch = next(iter(self.loader(x, y, np.arange(len(x)), len(x))))
        self.set_dropout(False)
        try:
            losses = [self.train_step(batch) for _ in range(k)]
        finally:
            self.set_dropout(True)
        return [float(self.to_numpy(v)) for v in losses], self.get_params()

    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        """``gated_steps``' parameters: k steps through the timed program, dropout off."""
        return self.gated_steps(x, y, k)[1]

    @abstractmethod
    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """A native batch back in canonical layout (for the loader conformance test)."""

    @abstractmethod
    def manifest(self) -> dict:
        """The fast path this model runs: at least ``MANIFEST_KEYS``."""

    def summary(self) -> str:
        """The native model as the framework shows it (``print(model)``, ``model.summary()``,
        the jitted step's structure): what the notebook displays."""
        return repr(self)

    # -- the generating face (a decoder's): greedy decoding with a key/value cache ------------
    #: whether this model generates (defines ``prefill`` and ``decode``)
    GENERATES: bool = False

    def prefill(self, prompts: np.ndarray) -> tuple[Any, Any]:
        """Start generating from ``prompts`` (N, P) int token ids, canonical, the same length
        each (no padding): the forward over every prompt position, each causal attention's keys
        and values kept (the KV cache, for ``P`` plus the new tokens). Returns native values:
        the logits at the last position (N, V) and the greedy next token (N,), its argmax."""
        raise BackendError(f"backend {self.backend!r} does not generate (no KV-cache decoding)")

    def decode(self, tokens: Any) -> tuple[Any, Any]:
        """One step: ``tokens`` (N,), the last call's native next tokens or a NumPy int array
        (the gate feeds the reference's), at the position after those seen; their keys and
        values join the cache. Returns the logits (N, V) and the greedy next token (N,),
        native."""
        raise BackendError(f"backend {self.backend!r} does not generate (no KV-cache decoding)")

    def reset_peak_device_memory(self) -> bool:
        """Restart the device's peak-memory counter, so that ``peak_device_memory_bytes`` read
        next is a window's own (a generation's, not the training run's before it). False where
        there is none to restart (the CPU) or the framework cannot (JAX's, CuPy's pool): a
        caller then records no windowed device peak."""
        return False

    # -- helpers every backend inherits -----------------------------------------------------
    def predict_numpy(self, x: np.ndarray) -> np.ndarray:
        """Evaluation-mode outputs for a canonical NumPy batch (``request_batch``), in the
        canonical layout (``output_to_canonical``)."""
        return self.output_to_canonical(self.to_numpy(self.predict(self.request_batch(x))))

    def request_batch(self, x: np.ndarray) -> Batch:
        """A canonical NumPy batch as this model's native batch, the way a server takes a
        request (``predict_numpy``, the serving scenarios): the native loader's one batch; a
        backend whose loader is a pipeline with a per-call cost (``tf.data``) overrides it with
        the direct conversion."""
        return next(iter(self.loader(x, None, np.arange(len(x)), len(x))))

    def output_to_canonical(self, out: np.ndarray) -> np.ndarray:
        """The model's output (NumPy, native layout) in the canonical layout of the workload's
        last op: what makes every *prefix* of a graph comparable with the reference (the
        localiser builds one per op). A backend whose activations are not canonical (NHWC
        images, an NHWC flatten's H, W, C rows, time-major sequences) overrides this, in its
        ``model.py``; the default is for backends that compute in the canonical layout."""
        return out

    def runtime_manifest(self) -> dict:
        """The manifest keys every backend takes from its runtime (typed, not prose)."""
        r = self.runtime
        return {
            "backend": self.backend,
            "dtype": r.dtype,
            "precision": r.precision,
            "tf32": r.tf32,
            "threads": r.threads,
        }


def precision_unsupported(
    package: ModuleType, name: str, precision: str, device: str, dtype: str = "float32"
) -> str:
    """Why backend ``name`` (its package ``package``) cannot run the known policy ``precision``
    on ``device`` (``cpu``, ``cuda``, or ``auto`` before it is resolved) in ``dtype``, or ``""``
    when it may: the one place this is decided (the plan's skips, the cell's request and
    ``build`` ask here). It reads the package's ``PRECISIONS`` and ``UNSUPPORTED_PRECISIONS``,
    importing no framework. A cell that cannot is *skipped* with this reason, not failed."""
    check_precision(precision)
    supported = tuple(getattr(package, "PRECISIONS", ("fp32",)))
    if precision not in supported:
        why = getattr(package, "UNSUPPORTED_PRECISIONS", {}).get(precision, "")
        return (
            f"backend {name!r} does not run precision {precision} "
            f"(it supports {', '.join(supported)})" + (f": {why}" if why else "")
        )
    if precision in CUDA_ONLY_PRECISIONS and device == "cpu":
        return f"precision {precision} runs on CUDA only, and this cell asks for the CPU"
    if precision in MIXED_PRECISIONS and dtype != "float32":
        return f"precision {precision} keeps float32 master weights; it needs --dtype float32"
    return ""


def training_unsupported(package: ModuleType, name: str) -> str:
    """Why backend ``name`` (its package ``package``) cannot run a training cell, or ``""``: a
    forward-only backend (a serving engine) says why in its package constant ``FORWARD_ONLY``
    (a capability, read without importing its framework). Its cell of a training workload
    runs the forward pass only (``rosetta.runner.cell.Cell._forward``: gated against the
    reference's forward pass, timed, batch-1 latency), and the conformance checks that need a
    training step skip it with this reason."""
    why = getattr(package, "FORWARD_ONLY", "")
    if not why:
        return ""
    return f"backend {name!r} is forward-only ({why}): it runs no training step"


def dtype_unsupported(package: ModuleType, name: str, dtype: str) -> str:
    """Why backend ``name`` cannot run ``dtype`` (its package's ``DTYPES``), or ``""``: such a
    cell is skipped with this reason (the serving engines run float32 only)."""
    dtypes = tuple(getattr(package, "DTYPES", ("float32", "float64")))
    if dtype in dtypes:
        return ""
    return f"backend {name!r} runs {', '.join(dtypes)} only, not {dtype}"


def hwc_flatten_at_output(workload, channels_last: bool) -> tuple[int, int, int] | None:
    """``(C, H, W)`` when the workload's output is the flatten of a ``(C, H, W)`` activation
    held channels-last (its rows then in H, W, C order, reaching the output through ReLU or
    dropout unchanged), else ``None``: what ``output_to_canonical`` must undo."""
    chw, shape = None, tuple(workload.input.shape)
    for node in workload.graph:
        if isinstance(node, ops.Flatten) and len(shape) == 3 and channels_last:
            chw = shape
        elif not isinstance(node, (ops.ReLU, ops.Dropout)):
            chw = None
        shape = node.out_shape(shape)
    return chw


def check_contract(module: ModuleType) -> None:
    """Raise ``BackendError`` naming the first contract name ``module`` lacks."""
    for name in CONTRACT:
        if not hasattr(module, name):
            raise BackendError(
                f"backend module {module.__name__} lacks contract name {name!r} "
                f"(see rosetta/backends/base.py)"
            )


def check_layout(package: str) -> None:
    """Raise ``BackendError`` naming the first file or name of ``MODULES`` that the backend
    package ``package`` lacks, or a name whose parameters differ from the contract's."""
    for mod, names in MODULES.items():
        try:
            module = importlib.import_module(f"{package}.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{mod}":
                raise
            raise BackendError(f"backend {package} lacks its {mod}.py (see MODULES)") from None
        for name, params in names.items():
            if not hasattr(module, name):
                raise BackendError(f"backend {package}.{mod} lacks {name!r} (see MODULES)")
            if params is None:
                continue
            sig = inspect.signature(getattr(module, name))
            got = tuple(
                p.name
                for p in sig.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and p.default is p.empty
            )
            if got != params:
                raise BackendError(
                    f"backend {package}.{mod}.{name} takes {got}, the contract says {params}"
                )


def resolve_device(request: Runtime, devices: tuple[str, ...], has_cuda: bool) -> tuple[str, str]:
    """``cpu``/``cuda``/``auto`` -> (the device this backend will use, why), or one clear error."""
    name = request.backend
    if request.device == "cpu":
        return "cpu", "asked for cpu"
    usable = "cuda" in devices and has_cuda
    if request.device == "auto":
        if usable:
            return "cuda", "auto: a CUDA GPU is visible"
        why = "it runs on the CPU only" if "cuda" not in devices else "no CUDA GPU is visible"
        return "cpu", f"auto: {why} to {name}"
    if not usable:
        why = "it runs on the CPU only" if "cuda" not in devices else "no CUDA GPU is visible to it"
        raise BackendError(
            f"--device cuda asked for, but backend {name!r} cannot use CUDA here: {why}; "
            f"use --device cpu or auto"
        )
    return "cuda", "asked for cuda"


def configure(runtime_module: ModuleType, devices: tuple[str, ...], request: Runtime) -> Runtime:
    """Apply ``request`` to this process through a backend's ``runtime.py`` and return the
    runtime in effect: threads first (pools start with the framework's first use), then the
    device, then the numeric policy. Every value is read back, none copied from the request."""
    threads = int(runtime_module.set_threads(request.wanted_threads))
    _limit_numpy_blas(threads)
    device, reason = resolve_device(request, devices, bool(runtime_module.cuda_available()))
    if request.tf32 and device != "cuda":
        raise BackendError(
            f"--tf32 applies to CUDA only, and backend {request.backend!r} runs on {device} here "
            f"({reason}); drop --tf32 or run where a GPU is visible"
        )
    tf32 = bool(runtime_module.set_tf32(request.tf32, device))
    return request.resolved(device=device, device_reason=reason, threads=threads, tf32=tf32)


def _limit_numpy_blas(threads: int) -> None:
    """NumPy's own BLAS pool (the host-side work of every cell: loaders, the gate's reference)
    at the cell's threads, so the manifest's ``blas_kernels`` read what the cell ran with: an
    ONNX Runtime cell at ``--threads 1`` listed its BLAS at 2 threads before."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def require_resolved(runtime: Runtime) -> None:
    """Refuse to build under a runtime that was never configured."""
    if (
        not isinstance(runtime, Runtime)
        or runtime.device not in ("cpu", "cuda")
        or not (runtime.threads)
    ):
        raise BackendError(
            "build needs the runtime in effect: call configure(Runtime.request(...)) first "
            f"(got {runtime!r})"
        )


@dataclass(frozen=True)
class BackendAPI:
    """The entry points of a backend package, written once (each ``__init__`` only names its
    constants and assigns these). Submodules load on first use, so importing a backend package
    imports no framework."""

    package: str
    devices: tuple[str, ...]

    def _mod(self, name: str) -> ModuleType:
        return importlib.import_module(f"{self.package}.{name}")

    def available(self) -> tuple[bool, str]:
        """Whether the framework imports here, and why not."""
        try:
            runtime = self._mod("runtime")
        except ImportError as exc:
            return False, f"{self.package.rsplit('.', 1)[-1]} does not import: {exc}"
        return runtime.available()

    def versions(self) -> dict[str, str]:
        """Framework versions, for the environment manifest."""
        return self._mod("runtime").versions()

    def cuda_available(self) -> bool:
        """Whether the framework sees a CUDA GPU (``--device auto``)."""
        return bool(self._mod("runtime").cuda_available())

    def configure(self, request: Runtime) -> Runtime:
        """The runtime in effect for ``request`` (see :func:`configure`), with every option the
        package declares (``OPTIONS``) at the value asked or its default, checked."""
        from rosetta.backends.options import in_effect

        package = importlib.import_module(self.package)
        chosen = in_effect(request.backend, package, dict(request.options))
        return replace(configure(self._mod("runtime"), self.devices, request), options=chosen)

    def build(self, workload, params: Params, runtime: Runtime, **options) -> Model:
        """``workload`` lowered to this framework, holding ``params`` (canonical)."""
        require_resolved(runtime)
        name = self.package.rsplit(".", 1)[-1]
        package = importlib.import_module(self.package)
        why = precision_unsupported(package, name, runtime.precision, runtime.device, runtime.dtype)
        if why:
            raise BackendError(why)
        return self._mod("model").build(workload, params, runtime, **options)

    def run_op(self, op: object, x: np.ndarray, runtime: Runtime, *, training: bool = False):
        """One parameter-free op through the backend's table, NumPy in and out."""
        if not isinstance(op, PARAM_FREE_OPS):
            raise unsupported(self.package.rsplit(".", 1)[-1], op)
        require_resolved(runtime)
        return np.asarray(self._mod("lowering").apply_op(op, np.asarray(x), runtime, training))
