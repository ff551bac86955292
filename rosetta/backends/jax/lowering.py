"""JAX's side of the table: what the op modules' pure ``jax.lax`` functions share, and how they
compose.

Each op of the spec is one module of ``ops/`` (its ``build``, ``render`` and ``param_layout``
side by side); its ``build`` turns the op into a *layer*, a pure function ``layer(params, x,
run) -> y`` over the parameter pytree (a dict keyed by canonical names, arrays in the native
layouts of the op modules' ``param_layout``, gathered by ``weights.py``). This file holds the
build context :class:`Ctx` and the per-call :class:`Run` they read, ``sequence`` (layers chained)
and ``residual`` (a block's two branches added), the attention form in effect, the image layout,
and ``apply_op``. ``TABLE`` is the native face of ``source.OPS``: a graph lowers to one composed
function that ``jax.jit`` traces once per batch shape (``model.py``).

Why ``jax.lax`` and not Flax modules: the spec already *is* the module tree, with canonical
parameter names; a Flax model would add a second naming scheme (``params/Conv_0/kernel``) to map
back and forth, and hide the choices this backend must state: the convolution's dimension
numbers (NHWC or NCHW), explicit asymmetric padding, the max-pool's ``-inf`` padding, the GRU's
``reset_after`` gate equations under ``lax.scan``, and float32 precision (``Precision.HIGHEST``
unless the runtime allows TF32). Here each is one line a reader can check against ``numpy_ref``.
The hand-written Flax models in ``benchmarks/handwritten/jax_models.py`` measure what this costs.

Dropout is switched by ``Run.dropout``, a boolean *array* argument of the compiled program (not
a Python flag): the timed ``train`` executable runs with dropout on, and the gate runs the very
same executable with it off (masks of ones, scale 1), with no retrace.

Layouts: images are ``NHWC`` or ``NCHW`` (``Ctx.layout``), kernels ``HWIO`` or ``OIHW`` to
match; sequences run time-major through ``lax.scan``. Every array made here takes the model's
dtype explicitly (see ``runtime.precision_scope``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rosetta.backends.driver import LoweringTable, Site, Wiring, lower_op
from rosetta.backends.jax import weights
from rosetta.backends.jax.runtime import jax_device, precision_scope
from rosetta.backends.jax.source import OPS
from rosetta.runtime import Runtime
from rosetta.spec import ops

NAME = "jax"
Params = dict[str, Any]  # canonical name -> jax array in native layout
GRU_UNROLL = 1  # scan unroll: 10 took 1.08x [0.98, 1.16] as long (lowering_jax --choices)
#: the forms of multi-head attention (``Ctx.attention``): ``jax.nn``, one
#: ``jax.nn.dot_product_attention`` (the default; float64 always composes, see
#: :func:`attention_in_effect`), or ``composed`` from ``einsum``/``softmax``
ATTENTION_FORMS = ("jax.nn", "composed")
ATTENTION_DEFAULT = "jax.nn"


class Run(NamedTuple):
    """Per-call context of a forward pass."""

    training: bool  # static: the train programs (True) or the evaluation ones (False)
    key: Any = None  # a jax PRNG key (training only)
    dropout: Any = None  # a traced bool scalar: dropout on (True) or masks of ones (False)
    valid: Any = None  # (N, T) bool, True at real tokens: set by the model's own sequence
    #: generating (evaluation only): ``{"offset": traced int32, the positions already seen,
    #: "cache": {attention name: (keys, values) (N, context, heads, d)}}``; each causal attention
    #: writes its updated cache back into the dict while the program is traced
    decode: Any = None


Layer = Callable[[Params, Any, Run], Any]


@dataclass
class Ctx:
    """What an entry needs beyond its op and site: layout, dtype, precision, fast-path knobs."""

    layout: str  # "NHWC" | "NCHW" (images)
    dtype: Any  # jnp.float32 | jnp.float64
    precision: Any = lax.Precision.HIGHEST  # None: jax_default_matmul_precision (TF32 allowed)
    platform: str = "cpu"  # the jax platform the programs run on
    conv_weight_grad: str = "auto"  # "xla" | "gemm" | "auto" (see use_gemm_weight_grad)
    gru_unroll: int = GRU_UNROLL  # lax.scan unroll factor of the GRU
    time_major: bool = True  # embedded sequences (T, N, E) for the GRU's scan; else (N, T, E)
    attention: str = ATTENTION_DEFAULT  # the form of every attention op (ATTENTION_FORMS)
    sites: Iterator[int] = field(default_factory=itertools.count)  # dropout key per site

    def use_gemm_weight_grad(self, op: ops.Conv2D) -> bool:
        """Whether conv ``op`` takes its kernel gradient from per-tap GEMMs.

        ``auto``: on the CPU in NHWC (XLA:CPU's kernel-gradient convolution is the slow one;
        cuDNN's is not). Measured in ``benchmarks/lowering_jax.py --choices``."""
        if self.layout != "NHWC" or self.conv_weight_grad == "xla" or op.groups != 1:
            return False  # a grouped conv keeps XLA's (the taps' GEMMs are per group)
        return self.conv_weight_grad == "gemm" or self.platform == "cpu"

    @property
    def channel_axis(self) -> int:
        return 3 if self.layout == "NHWC" else 1

    @property
    def spatial_axes(self) -> tuple[int, int]:
        return (1, 2) if self.layout == "NHWC" else (2, 3)

    def spatial(self, a: tuple, fill: Any) -> tuple:
        """A per-axis tuple for an image tensor: ``a`` (H, W) on the spatial axes, else ``fill``."""
        out = [fill] * 4
        out[self.spatial_axes[0]], out[self.spatial_axes[1]] = a
        return tuple(out)

    def dot(self, a: Any, w: Any) -> Any:
        """``a @ w`` at the runtime's precision."""
        return jnp.dot(a, w, precision=self.precision)


def attention_in_effect(option: str | None, dtype: Any, device: str = "cpu") -> tuple[str, str]:
    """The attention form (:data:`ATTENTION_FORMS`) a model in ``dtype`` on ``device`` lowers,
    and why: float64 always composes (``jax.nn.dot_product_attention``'s softmax runs in float32,
    jax 0.10, ``_dot_product_attention_core``, which the float64 gate's 1e-8 bounds would see);
    else the build's ``option`` (benchmarks) where given; else on the CPU the composed form, as
    measured (``python -m benchmarks fastpath_transformer``: jax.nn / composed 1.027 [1.007,
    1.060] of the train step, alone on a 2-core Zen 4, 2026-11-25: both are XLA programs of the
    same ops there), and on a GPU ``jax.nn.dot_product_attention``, the call that can reach
    cuDNN's fused attention (ran on an H200 in bf16, gated equivalent: docs/gpu/)."""
    if jnp.dtype(dtype) == jnp.float64:
        return "composed", "float64: jax.nn.dot_product_attention's softmax is float32 only"
    if option is not None:
        return option, "the build's attention option"
    if device == "cpu":
        return "composed", (
            "default on the CPU: the composed form, measured faster (jax.nn/composed 1.027 "
            "[1.007, 1.060], benchmarks/fastpath_transformer, Zen 4, 2026-11-25)"
        )
    return ATTENTION_DEFAULT, (
        "default on a GPU: jax.nn.dot_product_attention, the call that can reach cuDNN's fused "
        "attention (ran on an H200 in bf16, gated equivalent: docs/gpu/)"
    )


def sequence(layers: list[Layer], site: Site, ctx: Ctx) -> Layer:
    """Layers in order; an empty sequence is the identity (a plain residual shortcut). The
    model's own sequence over token ids records their padding mask for the masked ops."""
    tokens = site.path == "" and len(site.in_shape) == 1

    def sequence_layer(p: Params, x: Any, run: Run) -> Any:
        if tokens:
            run = run._replace(valid=x != 0)  # (N, T)
        for layer in layers:
            x = layer(p, x, run)
        return x

    return sequence_layer


def residual(body: Layer, shortcut: Layer, site: Site, ctx: Ctx) -> Layer:
    """``body(x) + shortcut(x)``."""
    return lambda p, x, run: body(p, x, run) + shortcut(p, x, run)


def graph(layers: list[Layer], wiring: Wiring, site: Site, ctx: Ctx) -> Layer:
    """Layers wired by index: layer ``j`` on the outputs of the layers ``wiring.inputs[j]`` (-1:
    the graph's input; a variadic layer gets their list); the last one's output is the graph's.
    A pure function like the rest: XLA sees the dataflow, not the dict."""
    inputs = wiring.inputs

    def graph_layer(p: Params, x: Any, run: Run) -> Any:
        values = {-1: x}
        for j, (layer, src) in enumerate(zip(layers, inputs, strict=True)):
            args = [values[k] for k in src]
            values[j] = layer(p, args if len(src) > 1 else args[0], run)
        return values[len(layers) - 1]

    return graph_layer


TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy of ``logits`` (N, K) against integer ``labels`` (N,), or of a
    language model's (N, T, K) against (N, T): the mean over every sample and position."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


#: the layout of images, on either device, for every graph (the choice depends on no workload):
#: CPU: the CNN step in NCHW took 1.25x [1.17, 1.31] as long as in NHWC on this machine
#: (``benchmarks/lowering_jax.py --choices``; XLA:CPU's convolutions are NHWC-native); CUDA:
#: XLA's layout assignment picks the physical layout cuDNN wants whatever the logical one
#: (ran on an H200, docs/gpu/2026-11-27-h200: the CNN gated equivalent, 2.2 ms a training
#: step). ``build(..., layout="NCHW")`` overrides it for benchmarks.
IMAGE_LAYOUT = "NHWC"


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch, through ``TABLE`` (dropout keys from
    ``runtime.seed``)."""
    layout = IMAGE_LAYOUT
    with precision_scope(runtime.dtype):
        ctx = Ctx(layout, jnp.dtype(runtime.dtype))
        layer = lower_op(TABLE, op, tuple(x.shape[1:]), ctx)
        xa = np.asarray(x, dtype=runtime.dtype)
        xn = weights.image_to_native(xa, layout) if xa.ndim == 4 else xa
        run = Run(training, jax.random.key(runtime.seed), jnp.asarray(True))
        y = np.asarray(layer({}, jax.device_put(xn, jax_device(runtime.device)), run))
    if isinstance(op, ops.Flatten) and xa.ndim == 4:
        return weights.flat_to_canonical(y, xa.shape[1:], layout)
    return weights.image_to_canonical(y, layout) if y.ndim == 4 else y
