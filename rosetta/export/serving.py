"""The forward-only ``Model`` both serving engines share: the exported graph, run by an engine.

An engine backend (``rosetta.backends.onnxruntime``, ``.openvino``) subclasses
:class:`ServingModel` with five methods: ``_compile(model)`` (an ``onnx.ModelProto`` -> the
engine's executable, made with the engine's fast-path settings), ``_run(x)`` (one batch through
it, NumPy in and out), ``engine_settings()`` (the settings in effect, read back from the
engine), and for generation ``_compile_generation(model)``/``_run_generation(feeds)`` (the
generation graph's executable, its inputs by name in and its outputs by name out). Everything
else is here, once:

- the graph: :func:`rosetta.export.graph.to_model` of the workload (or a user's ``.onnx`` file,
  checked by :func:`load_file`), in the runtime's dtype; ``set_params`` swaps its initializers
  (the nodes stay: a user's file keeps its own graph) and compiles again; ``get_params`` reads
  them back through ``weights.to_canonical`` (exact);
- the timed face: the loader yields NumPy batches (an engine's input *is* a host array), ``predict``
  runs one through the engine; there is no ``train_step``: an engine runs no training, so a
  training workload on it runs the forward pass only (``FORWARD_ONLY`` in the backend package,
  read by ``rosetta.backends.base.training_unsupported``), and its gate compares the forward pass;
- generation (``prefill``/``decode``, greedy with a KV cache): the workload's *generation graph*
  (:func:`rosetta.export.graph.generation_model`, one graph for the prefill and every step)
  holding the model's weights (a user's file's too: its initializers, the spec's nodes), made
  and compiled on the first prefill after the weights last changed; the prefill runs it on the
  prompts with empty pasts (S = 0), each decode step on one token per row with the last call's
  presents as its pasts. The greedy argmax is taken on the host (NumPy, over the (N, V) logits
  the engine hands back anyway).
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from rosetta.backends.base import Batch, Model, Params
from rosetta.errors import BackendError
from rosetta.export import graph
from rosetta.export.weights import to_canonical, to_initializers
from rosetta.runtime import Runtime
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.weights import check_weights

#: the largest ``.onnx`` file a backend reads (protobuf's own limit is 2 GiB)
MAX_FILE_BYTES = 2**31 - 1
#: the attention ops and the additive mask each adds to its scores (the manifest's ``attention``)
ATTENTION_MASKS = {
    ops.Attention: "the key padding mask (0 / -inf)",
    ops.CausalAttention: "the causal mask (a constant (T, T): 0 / -inf)",
}


def load_file(path: str | Path, workload) -> onnx.ModelProto:
    """A user's ``.onnx`` file as a ``ModelProto`` that is an export of ``workload``: it parses,
    passes ``onnx.checker``, and declares the exporter's input, output and initializers (names
    and shapes). Anything else is one line naming the file and what is wrong."""
    path = Path(path)
    hint = f"export one with `rosetta export {workload.name} --onnx FILE`"
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise BackendError(f"{path}: not a regular file; {hint}")
        if size > MAX_FILE_BYTES:
            raise BackendError(f"{path}: {size:,} bytes, over the 2 GiB an ONNX protobuf holds")
        raw = path.read_bytes()
    except OSError as exc:
        raise BackendError(f"{path}: cannot read ({exc.strerror or exc}); {hint}") from None
    try:
        model = onnx.load_model_from_string(raw)
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - a corrupt file: DecodeError, ValidationError...
        why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise BackendError(f"{path}: not a valid ONNX model ({why}); {hint}") from None
    _check_foreign(path, model, workload, hint)
    return model


def _check_foreign(path: Path, model: onnx.ModelProto, workload, hint: str) -> None:
    """Refuse a valid ONNX model that is not an export of ``workload`` (one line)."""

    def dims(v) -> tuple:
        return tuple(d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim)

    g = model.graph
    want_in = ("N", *workload.input.shape)
    ins = {i.name: dims(i) for i in g.input}
    outs = {o.name: dims(o) for o in g.output}
    if ins.get(graph.INPUT, ())[1:] != want_in[1:] or graph.OUTPUT not in outs:
        raise BackendError(
            f"{path}: not an export of workload {workload.name!r} (it reads "
            f"{sorted(ins)[:3]} and writes {sorted(outs)[:3]}; an export reads {graph.INPUT!r} "
            f"of shape {want_in} and writes {graph.OUTPUT!r}); {hint}"
        )
    have = {i.name: tuple(i.dims) for i in g.initializer}
    zeros = {k: np.zeros(s, dtype=np.float32) for k, s in _param_shapes(workload).items()}
    want = {k: v.shape for k, v in to_initializers(workload, zeros, "float32").items()}
    wrong = sorted(k for k in want if have.get(k) != want[k])
    if wrong:
        raise BackendError(
            f"{path}: not an export of workload {workload.name!r} (initializer {wrong[0]!r} "
            f"is {have.get(wrong[0], 'missing')}, the spec's is {want[wrong[0]]}); {hint}"
        )


def _param_shapes(workload) -> dict[str, tuple]:
    return {p.name: tuple(p.shape) for p in workload.param_specs}


class ServingModel(Model):
    """A workload's exported graph run by a serving engine: forward only (module docstring)."""

    GENERATES = True  # a workload without causal attention is refused by its graph, one line
    backend = "serving"
    engine = "an inference engine"
    why_float32 = "the engine has no float64 kernels"  # each engine says why

    def __init__(self, workload, params: Params, runtime: Runtime, *, onnx_file=None) -> None:
        if runtime.dtype != "float32":
            raise BackendError(
                f"backend {self.backend!r} runs float32 only ({self.why_float32}), not "
                f"{runtime.dtype!r}; use --dtype float32"
            )
        op = graph.unexpressible(workload.graph)
        if op is not None:
            raise BackendError(
                f"backend {self.backend!r} cannot lower op {type(op).__name__}: the ONNX export "
                f"(opset {graph.OPSET}) cannot express it"
            )
        self.workload = workload
        self.runtime = runtime
        self.images = workload.input.dtype != "int32"
        self.source = "rosetta.export.graph.to_model (the spec)"
        self.graph: onnx.ModelProto | None = None
        self.generation: onnx.ModelProto | None = None  # made by the first prefill
        self._cache: dict[str, np.ndarray] = {}  # the pasts of the next decode step
        if onnx_file is not None:
            self.graph = load_file(onnx_file, workload)
            self.source = f"the file {Path(onnx_file).name} (checked: an export of the workload)"
            self._compile_graph()
        else:
            self.set_params(params)

    # -- what an engine supplies ---------------------------------------------------------------
    @abstractmethod
    def _compile(self, model: onnx.ModelProto) -> None:
        """Make the engine's executable of ``model`` with its fast-path settings."""

    @abstractmethod
    def _run(self, x: np.ndarray) -> np.ndarray:
        """One batch (canonical layout, NumPy) through the executable: the outputs."""

    @abstractmethod
    def engine_settings(self) -> dict:
        """The engine's settings in effect, read back from it (the manifest and the report)."""

    @abstractmethod
    def _compile_generation(self, model: onnx.ModelProto) -> None:
        """Make the engine's executable of the generation graph ``model`` (dynamic N, T, S)."""

    @abstractmethod
    def _run_generation(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The generation graph on ``feeds`` (its inputs by name): its outputs by name."""

    # -- the graph -------------------------------------------------------------------------------
    def _compile_graph(self) -> None:
        try:
            self._compile(self.graph)
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's own error type: one line
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise BackendError(f"backend {self.backend!r} cannot load the graph: {why}") from None

    def node_counts(self) -> dict[str, int]:
        """The graph's nodes by op type."""
        return graph.node_counts(self.graph)

    # -- timed face ------------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        dtype = np.float32 if self.images else np.int32
        order = np.asarray(order)
        for b in range(len(order) // batch_size):
            idx = order[b * batch_size : (b + 1) * batch_size]
            xb = np.ascontiguousarray(x[idx], dtype=dtype)
            yield (xb,) if y is None else (xb, np.asarray(y)[idx])

    def train_step(self, batch: Batch):
        raise BackendError(f"backend {self.backend!r} is forward-only: it runs no training step")

    def loss_and_grads(self, x, y):
        raise BackendError(f"backend {self.backend!r} is forward-only: it computes no gradients")

    def set_dropout(self, enabled: bool) -> None:
        """Nothing to switch: the exported graph is the evaluation form, without dropout."""

    def predict(self, batch: Batch) -> np.ndarray:
        return self._run(batch[0])

    def to_numpy(self, value) -> np.ndarray:
        return np.array(value, copy=True)

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return tuple(np.array(b) for b in batch)

    # -- generation ------------------------------------------------------------------------------
    def prefill(self, prompts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The generation graph over ``prompts`` (N, P) with empty pasts (S = 0): the last
        position's logits (N, V) and the greedy next tokens (N,); the presents are kept."""
        if self.generation is None:
            self.generation = graph.generation_model(
                self.workload, self.get_params(), self.runtime.dtype
            )
            try:
                self._compile_generation(self.generation)
            except Exception as exc:  # noqa: BLE001 - the engine's own error type: one line
                self.generation = None
                why = " ".join(str(exc).split())[:200] or type(exc).__name__
                raise BackendError(
                    f"backend {self.backend!r} cannot load the generation graph: {why}"
                ) from None
        ids = np.ascontiguousarray(prompts, dtype=np.int32)  # (N, P)
        empty = {  # (N, heads, 0, d) per causal attention layer
            name.format(i): np.zeros((len(ids), h, 0, d), dtype=self.runtime.dtype)
            for i, (h, d) in enumerate(graph.cache_shapes(self.workload))
            for name in (graph.PAST_KEY, graph.PAST_VALUE)
        }
        return self._step(ids, empty)

    def decode(self, tokens) -> tuple[np.ndarray, np.ndarray]:
        """One position: ``tokens`` (N,) after those seen, the cache fed back as the pasts."""
        ids = np.ascontiguousarray(np.asarray(tokens).reshape(-1, 1), dtype=np.int32)  # (N, 1)
        return self._step(ids, self._cache)

    def _step(self, ids: np.ndarray, pasts: dict[str, np.ndarray]):
        out = self._run_generation({graph.INPUT: ids, **pasts})
        self._cache = {  # present_*_<i> (N, heads, S + T, d) -> the next step's past_*_<i>
            past.format(i): out[present.format(i)]
            for i in range(len(pasts) // 2)
            for past, present in ((graph.PAST_KEY, graph.PRESENT_KEY),
                                  (graph.PAST_VALUE, graph.PRESENT_VALUE))
        }  # fmt: skip
        logits = out[graph.OUTPUT]  # (N, V): the last position's
        return logits, logits.argmax(axis=-1)  # the greedy token on the host

    # -- NumPy face ------------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        """Swap the graph's initializers for ``params`` (the nodes stay) and compile again; the
        generation graph is made again from them by the next prefill."""
        check_weights(self.workload, params)
        self.generation, self._cache = None, {}
        if self.graph is None:
            self.graph = graph.to_model(self.workload, params, self.runtime.dtype)
        else:
            inits = to_initializers(self.workload, params, self.runtime.dtype)
            model = onnx.ModelProto()
            model.CopyFrom(self.graph)
            for t in model.graph.initializer:
                if t.name in inits:
                    t.CopyFrom(numpy_helper.from_array(inits[t.name], t.name))
            self.graph = model
        self._compile_graph()

    def get_params(self) -> Params:
        inits = {t.name: numpy_helper.to_array(t) for t in self.graph.graph.initializer}
        return to_canonical(self.workload, inits)

    def _has(self, op_type: str) -> bool:
        return any(n.op_type == op_type for n in self.graph.graph.node)

    def summary(self) -> str:
        counts = ", ".join(f"{k} x{v}" for k, v in self.node_counts().items())
        opset = next(
            (o.version for o in self.graph.opset_import if o.domain in ("", "ai.onnx")), "?"
        )
        nodes = len(self.graph.graph.node)
        return f"ONNX graph, opset {opset}: {nodes} nodes ({counts}) on {self.engine}"

    def manifest(self) -> dict:
        settings = self.engine_settings()
        layout = "NCHW" if self.images else "NT (token ids; activations batch-major (N, T, E))"
        if self._has("GRU"):
            layout = "NT (token ids; the GRU runs ONNX's TNC)"
        attention = "n/a"
        kinds = {  # a softmax layer is a Softmax node too: ask the spec, not the graph
            type(op) for op, _, _ in walk(self.workload.graph, self.workload.input.shape)
        }
        masks = [text for op, text in ATTENTION_MASKS.items() if op in kinds]
        if masks:
            attention = (
                f"composed: MatMul, Div by sqrt(d), Add of {' and '.join(masks)}, "
                "Softmax, MatMul (the engine's graph optimiser fuses what it recognises)"
            )
        return {
            **self.runtime_manifest(),
            "device": "cpu",
            "device_reason": self.runtime.device_reason,
            "layout": layout,
            "compile": f"{self.engine}: " + ", ".join(f"{k}={v}" for k, v in settings.items()),
            "engine_settings": settings,
            "autotune": "n/a",
            "fused_rnn": "yes: ONNX GRU op (one node over all steps)"
            if self._has("GRU")
            else "n/a",
            "attention": attention,
            "loader": "NumPy batches in the runner's order (the engine reads host arrays)",
            "optimizer": "n/a: forward only",
            "graph": self.source,
            "graph_nodes": len(self.graph.graph.node),
            "gated_program": f"the forward pass through the same {self.engine} executable "
            "the timed loop calls (forward only: no training step to gate)",
        }
