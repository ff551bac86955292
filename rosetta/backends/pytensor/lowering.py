"""PyTensor's side of the table: the build context the op modules use, and how layers compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and ``layout`` side by
side); its ``build`` turns the op into a *layer*, ``layer(x, run) -> y`` over PyTensor
variables, reading its parameters from ``shared`` variables that the build context :class:`Ctx`
makes (native layouts: each op's ``layout``, collected by ``weights.py``). A graph lowers to one
composed function (``sequence``, ``residual``), applied once to a symbolic input per compiled
program (``model.py``), differentiated by ``pytensor.grad``. ``TABLE`` is the native face of
``source.OPS``.

PyTensor 3 kept Theano's graph, ``grad`` and ``scan`` but dropped its neural-network ops (the
abstract ``conv2d`` with its ``CorrMM`` C kernels and ``signal.pool``); what it has is
``tensor.signal.convolve2d``, a single-channel SciPy signal convolution run in Python per image
and channel pair. So the image ops are written in PyTensor's own primitives, which every linker
compiles, over channels-last (NHWC) activations; what the convolution and max-pooling share is
here: the padding (``set_subtensor`` into a filled array, :func:`padded`), the KH*KW strided
slices under the kernel taps (:func:`tap_slices`) and the batch size read off the model's input
(:func:`batch_size`).

Dropout draws from the build context's shared random generator (``Ctx.rng``, seeded by the
runtime; :class:`Run` threads its state from site to site and the compiled step writes it back)
and is switched by ``Ctx.dropout_on``, a ``shared`` scalar the step reads. The sequence ops keep
the embedding's time-major ``(T, N, E)`` layout (which ``Model.output_to_canonical`` reads back
for every sequence op), and the mask of real tokens (``ids != 0``) is made once by the model's
sequence over the ids and handed down in ``Run.valid`` (:func:`token_mask`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from rosetta.backends.driver import LoweringTable, Site, Wiring, lower_op
from rosetta.backends.pytensor import runtime as settings
from rosetta.backends.pytensor import weights
from rosetta.backends.pytensor.source import OPS
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops

settings.load()
import pytensor  # noqa: E402  (after runtime.load(), which keeps the BLAS warning quiet)
import pytensor.tensor as pt  # noqa: E402

NAME = "pytensor"


class Run(NamedTuple):
    """Per-application context of a forward pass."""

    training: bool  # the training graph (dropout drawn) or the evaluation one
    rngs: list | None = None  # the generator after each draw, in order (training graphs)
    #: (N, T) bool, True at real tokens (id != 0): made by the model's own sequence over token
    #: ids, read by the ops with ``mask: tokens`` (attention, masked mean)
    valid: Any = None
    #: the batch size read off the model's own input: shapes built from it stay shallow
    #: (``pt.alloc`` infers a static shape by rewriting its arguments' whole graph: read off a
    #: layer's input deep in ResNet-50, its 18 paddings made the build 11 s instead of 1)
    batch: Any = None

    def update(self, ctx: Ctx) -> dict:
        """The update of the shared generator after this forward's draws (``{}`` if none)."""
        return {ctx.rng: self.rngs[-1]} if self.rngs else {}


Layer = Callable[[Any, Run], Any]


@dataclass
class Ctx:
    """The build context: dtype, the ``shared`` parameters by canonical name (native layout),
    the dropout switch and random stream."""

    dtype: str
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    sites: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.rng = pt.random.shared_rng(seed=self.seed, name="dropout_rng")
        #: 1: dropout at the spec's rates; 0: every unit kept (the gate), same compiled step
        self.dropout_on = pytensor.shared(np.asarray(1, dtype=self.dtype), name="dropout_on")

    def shared(self, name: str, shape: tuple[int, ...]) -> Any:
        """The ``shared`` variable of parameter ``name`` (zeros until ``set_params``)."""
        var = pytensor.shared(np.zeros(shape, dtype=self.dtype), name=name)
        self.params[name] = var
        return var

    def const(self, value: float) -> Any:
        """A constant in the model's dtype."""
        return pt.constant(np.asarray(value, dtype=self.dtype))


def batch_size(x: Any, run: Run) -> Any:
    """The batch size of NHWC ``x``: the model input's (:attr:`Run.batch`) where known."""
    return x.shape[0] if run.batch is None else run.batch


def padded(x: Any, run: Run, site: Site, padding: tuple[int, int, int, int], value: Any) -> Any:
    """NHWC ``x`` padded with ``value`` (zeros for a convolution, -inf for max-pooling)."""
    top, bottom, left, right = padding
    if not any(padding):
        return x
    c, h, w = site.in_shape
    full = pt.alloc(value, batch_size(x, run), h + top + bottom, w + left + right, c)
    return pt.set_subtensor(full[:, top : top + h, left : left + w, :], x)  # (N, Hp, Wp, C)


def tap_slices(xp: Any, site: Site, kernel: tuple[int, int], stride: tuple[int, int]) -> list[Any]:
    """The input under each kernel tap (i, j), row-major: KH*KW slices (N, Ho, Wo, C)."""
    (_, ho, wo), (sh, sw) = site.out_shape, stride
    return [
        xp[:, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw, :]
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]


def token_mask(run: Run, what: str) -> Any:
    """The (N, T) mask of real tokens the model's sequence made, or a one-line error."""
    if run.valid is None:
        raise BackendError(
            f"backend 'pytensor': {what} reads the padding mask of the model's token ids "
            "(mask: tokens): run it inside a model whose input is token ids"
        )
    return run.valid


def sequence(layers: list[Layer], site: Site, ctx: Ctx) -> Layer:
    """Layers in order; an empty sequence is the identity (a plain residual shortcut). The
    model's own sequence over token ids makes their padding mask (id != 0) for the masked ops
    (it stays out of the compiled graph where no op reads it)."""
    root = site.path == "" and site.at_input
    tokens = root and len(site.in_shape) == 1
    images = root and len(site.in_shape) == 3

    def sequence_layer(x: Any, run: Run) -> Any:
        if tokens:
            run = run._replace(valid=pt.neq(x, 0))  # (N, T); the same rngs list
        if images:
            run = run._replace(batch=x.shape[0])  # NHWC
        for layer in layers:
            x = layer(x, run)
        return x

    return sequence_layer


def residual(body: Layer, shortcut: Layer, site: Site, ctx: Ctx) -> Layer:
    """``body(x) + shortcut(x)``."""
    return lambda x, run: body(x, run) + shortcut(x, run)


def graph(layers: list[Layer], wiring: Wiring, site: Site, ctx: Ctx) -> Layer:
    """Layers wired by index: layer ``j`` on the outputs of the layers ``wiring.inputs[j]`` (-1:
    the graph's input; a variadic layer gets their list); the last one's output is the graph's.
    Symbolic: the compiled function sees the dataflow."""
    inputs = wiring.inputs

    def graph_layer(x: Any, run: Run) -> Any:
        values = {-1: x}
        for j, (layer, src) in enumerate(zip(layers, inputs, strict=True)):
            args = [values[k] for k in src]
            values[j] = layer(args if len(src) > 1 else args[0], run)
        return values[len(layers) - 1]

    return graph_layer


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def input_variable(shape: tuple[int, ...], dtype: str, name: str = "x") -> Any:
    """The symbolic input for per-sample canonical ``shape`` in the native layout: images
    (N, H, W, C), token ids (N, T) int32, a float sequence time-major (T, N, E), features."""
    if len(shape) == 3:
        c, h, w = shape
        return pt.tensor(name, dtype=dtype, shape=(None, h, w, c))
    if dtype.startswith("int"):
        return pt.tensor(name, dtype=dtype, shape=(None, shape[0]))
    if len(shape) == 2:
        return pt.tensor(name, dtype=dtype, shape=(shape[0], None, shape[1]))
    return pt.tensor(name, dtype=dtype, shape=(None, *shape))


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch, compiled with the runtime's linker
    (dropout draws from ``runtime.seed``)."""
    ctx = Ctx(runtime.dtype, seed=runtime.seed)
    in_shape = tuple(x.shape[1:])
    layer = lower_op(TABLE, op, in_shape, ctx)
    xa = np.asarray(x, dtype=runtime.dtype)
    xn = weights.image_to_native(xa) if xa.ndim == 4 else xa
    xv = pt.tensor("x", dtype=runtime.dtype, shape=(None, *xn.shape[1:]))
    mode = settings.mode(settings.resolve_linker(runtime.option("linker")), runtime.threads)
    run = Run(training, [])
    y = layer(xv, run)
    fn = pytensor.function([xv], y, updates=run.update(ctx), mode=mode)
    y = np.asarray(fn(xn))
    if isinstance(op, ops.Flatten) and xa.ndim == 4:
        return weights.flat_to_canonical(y, xa.shape[1:])
    return weights.image_to_canonical(y) if y.ndim == 4 else y
