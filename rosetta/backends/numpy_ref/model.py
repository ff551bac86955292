"""The reference interpreter: walks a workload's graph with the NumPy ops of this package.

Each op kind has one lowering function ``_<op>(op, x, ctx) -> (y, backward)``: it runs the op's
forward and returns a closure mapping the output gradient to the input gradient while adding
the op's parameter gradients to ``ctx.grads``. A forward pass records these closures on a tape;
the backward pass plays the tape in reverse (micrograd's idea, one layer at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rosetta.backends.base import Batch, Model, Params, threads_setting, unsupported
from rosetta.backends.numpy_ref import conv, nn, optim, rnn
from rosetta.errors import BackendError
from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import SGD, Adam, Workload

Backward = Callable[[np.ndarray], "np.ndarray | None"]


@dataclass
class _Ctx:
    """What a lowering needs besides its input: parameters, gradient sink, mode, dropout rng."""

    params: Params
    training: bool
    rng: np.random.Generator
    grads: Params = field(default_factory=dict)

    def acc(self, name: str, grad: np.ndarray) -> None:
        if name in self.grads:
            self.grads[name] = self.grads[name] + grad
        else:
            self.grads[name] = grad


def _conv2d(op: ops.Conv2D, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    bias = ctx.params[f"{op.name}.bias"] if op.bias else None
    y, cache = conv.conv2d_forward(x, ctx.params[f"{op.name}.kernel"], bias, op.stride, op.padding)

    def back(dy: np.ndarray) -> np.ndarray:
        dx, dw, db = conv.conv2d_backward(dy, cache)
        ctx.acc(f"{op.name}.kernel", dw)
        if op.bias:
            ctx.acc(f"{op.name}.bias", db)
        return dx

    return y, back


def _maxpool2d(op: ops.MaxPool2D, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    y, cache = conv.maxpool2d_forward(x, op.kernel, op.stride, op.padding)
    return y, lambda dy: conv.maxpool2d_backward(dy, cache)


def _relu(op: ops.ReLU, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    y, cache = nn.relu_forward(x)
    return y, lambda dy: nn.relu_backward(dy, cache)


def _dropout(op: ops.Dropout, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    mask = nn.dropout_mask(x.shape, op.rate, ctx.rng) if ctx.training and op.rate > 0 else None
    y, cache = nn.dropout_forward(x, op.rate, mask)
    return y, lambda dy: nn.dropout_backward(dy, cache)


def _flatten(op: ops.Flatten, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    y, cache = nn.flatten_forward(x)  # (N, C, H, W) -> (N, C*H*W), channel-major
    return y, lambda dy: nn.flatten_backward(dy, cache)


def _dense(op: ops.Dense, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    bias = ctx.params[f"{op.name}.bias"] if op.bias else None
    y, cache = nn.dense_forward(x, ctx.params[f"{op.name}.kernel"], bias)

    def back(dy: np.ndarray) -> np.ndarray:
        dx, dw, db = nn.dense_backward(dy, cache)
        ctx.acc(f"{op.name}.kernel", dw)
        if op.bias:
            ctx.acc(f"{op.name}.bias", db)
        return dx

    return y, back


def _batchnorm(op: ops.BatchNorm, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    p = ctx.params
    n = op.name
    y, cache = nn.batchnorm_forward(
        x, p[f"{n}.gamma"], p[f"{n}.beta"], p[f"{n}.mean"], p[f"{n}.var"], op.eps
    )

    def back(dy: np.ndarray) -> np.ndarray:
        dx, dgamma, dbeta = nn.batchnorm_backward(dy, cache)
        ctx.acc(f"{n}.gamma", dgamma)
        ctx.acc(f"{n}.beta", dbeta)
        return dx

    return y, back


def _global_avgpool(op: ops.GlobalAvgPool, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    y, cache = conv.global_avgpool_forward(x)  # (N, C, H, W) -> (N, C)
    return y, lambda dy: conv.global_avgpool_backward(dy, cache)


def _embedding(op: ops.Embedding, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    y, cache = nn.embedding_forward(x, ctx.params[f"{op.name}.table"])  # (N, T) -> (N, T, E)

    def back(dy: np.ndarray) -> None:
        ctx.acc(f"{op.name}.table", nn.embedding_backward(dy, cache))
        return None  # token ids have no gradient

    return y, back


def _gru(op: ops.GRU, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    p = ctx.params
    n = op.name
    y, cache = rnn.gru_forward(
        x,
        p[f"{n}.kernel"],
        p[f"{n}.recurrent_kernel"],
        p[f"{n}.bias_input"],
        p[f"{n}.bias_recurrent"],
    )  # (N, T, E) -> (N, H), last step

    def back(dy: np.ndarray) -> np.ndarray:
        dx, dk, drk, dbi, dbr = rnn.gru_backward(dy, cache)
        for role, g in (
            ("kernel", dk),
            ("recurrent_kernel", drk),
            ("bias_input", dbi),
            ("bias_recurrent", dbr),
        ):
            ctx.acc(f"{n}.{role}", g)
        return dx

    return y, back


def _residual(op: ops.Residual, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, Backward]:
    main, main_tape = run(op.body, x, ctx)
    side, side_tape = run(op.shortcut, x, ctx)
    y, cache = nn.add_forward(main, side)

    def back(dy: np.ndarray) -> np.ndarray:
        d_main, d_side = nn.add_backward(dy, cache)
        return backward(main_tape, d_main) + backward(side_tape, d_side)

    return y, back


LOWERINGS: dict[type, Callable] = {
    ops.Conv2D: _conv2d,
    ops.MaxPool2D: _maxpool2d,
    ops.ReLU: _relu,
    ops.Dropout: _dropout,
    ops.Flatten: _flatten,
    ops.Dense: _dense,
    ops.BatchNorm: _batchnorm,
    ops.GlobalAvgPool: _global_avgpool,
    ops.Embedding: _embedding,
    ops.GRU: _gru,
    ops.Residual: _residual,
}


def run(nodes: tuple, x: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, list[Backward]]:
    """Forward ``x`` through ``nodes``; returns the output and the tape of backward closures."""
    tape: list[Backward] = []
    for node in nodes:
        lower = LOWERINGS.get(type(node))
        if lower is None:
            raise unsupported("numpy_ref", node)
        x, back = lower(node, x, ctx)
        tape.append(back)
    return x, tape


def backward(tape: list[Backward], dy: np.ndarray) -> np.ndarray | None:
    """Play ``tape`` in reverse from output gradient ``dy``; returns the input gradient."""
    for back in reversed(tape):
        dy = back(dy)
    return dy


class ReferenceModel(Model):
    """A workload interpreted in NumPy: the trusted answer for every other backend.

    Its native values are NumPy arrays, so both faces of the contract are the same here: a
    native batch is a tuple of canonical arrays and ``to_numpy`` is ``np.asarray``."""

    backend = "numpy_ref"
    device = "cpu"

    def __init__(self, workload: Workload, params: Params, dtype: str = "float32", seed: int = 0):
        if dtype not in ("float32", "float64"):
            raise BackendError(f"backend 'numpy_ref' supports float32 and float64, not {dtype!r}")
        self.workload = workload
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)  # dropout masks, one draw per training step
        self.trainable = [p.name for p in workload.param_specs if p.trainable]
        for node, _, _ in walk(workload.graph, workload.input.shape):
            if type(node) not in LOWERINGS:
                raise unsupported(self.backend, node)
        self.params: Params = {}
        self.set_params(params)

    # -- timed face ----------------------------------------------------------------------------
    def loader(self, x, y, order, batch_size):
        for b in range(len(order) // batch_size):
            idx = order[b * batch_size : (b + 1) * batch_size]
            xb = self._input(np.take(x, idx, axis=0))
            yield (xb,) if y is None else (xb, np.take(y, idx, axis=0).astype(np.int64))

    def train_step(self, batch: Batch) -> np.ndarray:
        loss, grads = self._loss_and_grads(batch[0], batch[1], training=True)
        self.optimizer.step(self.params, grads)
        return np.asarray(loss)

    def predict(self, batch: Batch) -> np.ndarray:
        ctx = _Ctx(self.params, training=False, rng=self.rng)
        out, _ = run(self.workload.graph, self._input(batch[0]), ctx)
        return out

    def to_numpy(self, value) -> np.ndarray:
        return np.asarray(value)

    # -- NumPy face ----------------------------------------------------------------------------
    def set_params(self, params: Params) -> None:
        from rosetta.spec.weights import check_weights

        check_weights(self.workload, params)
        self.params = {k: np.array(v, dtype=self.dtype) for k, v in params.items()}
        self.optimizer = _make_optimizer(self.workload)

    def get_params(self) -> Params:
        return {k: v.copy() for k, v in self.params.items()}

    def _input(self, x: np.ndarray) -> np.ndarray:
        if self.workload.input.dtype == "int32":
            return np.asarray(x, dtype=np.int64)
        return np.asarray(x, dtype=self.dtype)

    def _loss_and_grads(self, x: np.ndarray, y: np.ndarray, training: bool) -> tuple[float, Params]:
        if self.workload.task != "train":
            raise BackendError(
                f"workload {self.workload.name!r} is forward-only ({self.workload.task})"
            )
        ctx = _Ctx(self.params, training=training, rng=self.rng)
        logits, tape = run(self.workload.graph, self._input(x), ctx)
        loss, cache = nn.softmax_cross_entropy_forward(logits, np.asarray(y, dtype=np.int64))
        backward(tape, nn.softmax_cross_entropy_backward(cache))
        return float(loss), {k: ctx.grads[k] for k in self.trainable}

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        return self._loss_and_grads(x, y, training=False)

    def deterministic_steps(self, x: np.ndarray, y: np.ndarray, k: int) -> Params:
        for _ in range(k):
            _, grads = self._loss_and_grads(x, y, training=False)
            self.optimizer.step(self.params, grads)
        return self.get_params()

    def batch_to_numpy(self, batch: Batch) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(a) for a in batch)

    def manifest(self) -> dict:
        return {
            "backend": self.backend,
            "device": "cpu",
            "dtype": self.dtype,
            "layout": "NCHW" if len(self.workload.input.shape) == 3 else "NTC",
            "threads": threads_setting() or "BLAS default",
            "compile": "eager (a Python interpreter over the graph, one NumPy call per op)",
            "autotune": "n/a",
            "fused_rnn": "n/a (a Python loop over time steps)",
            "loader": "NumPy fancy indexing (np.take) per batch",
            "optimizer": "rosetta.backends.numpy_ref.optim: the spec's rules, written out",
        }


def _make_optimizer(workload: Workload) -> optim.SGD | optim.Adam | None:
    o = workload.optimizer
    if isinstance(o, SGD):
        return optim.SGD(lr=o.lr, momentum=o.momentum, nesterov=o.nesterov)
    if isinstance(o, Adam):
        return optim.Adam(lr=o.lr, beta1=o.beta1, beta2=o.beta2, eps=o.eps)
    return None
