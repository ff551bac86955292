"""Backend ``jax``: the spec lowered to jitted JAX programs (``jax.lax`` + optax), run by XLA.

Files, one concept each: ``runtime.py`` (XLA flags, platforms, threads, the float64 scope;
configured here *before* jax is imported), ``lowering.py`` (the Rosetta of JAX: op -> lax
function, and why lax rather than Flax), ``layout.py`` (every canonical <-> native conversion),
``optim.py`` (optax, checked against the spec's rules), ``loader.py`` (device prefetching),
``model.py`` (the jitted train/predict programs and both faces of the contract).

Layout: images run NHWC on the CPU (the CNN step in NCHW took 1.25x [1.17, 1.31] as long on
this machine, ``benchmarks/lowering_jax.py --choices``) and NHWC on CUDA too, where XLA's layout
assignment picks the physical layout cuDNN wants whatever the logical one (not measured here: no
GPU).
"""

from __future__ import annotations

import importlib.metadata

import numpy as np

from rosetta.backends.jax import runtime

SETTINGS = runtime.configure()  # before anything imports jax

import jax  # noqa: E402

from rosetta.backends.base import PARAM_FREE_OPS, Params, unsupported  # noqa: E402
from rosetta.backends.jax import lowering  # noqa: E402
from rosetta.backends.jax.layout import (  # noqa: E402
    flat_to_canonical,
    image_to_canonical,
    image_to_native,
)
from rosetta.backends.jax.model import JaxModel  # noqa: E402
from rosetta.backends.jax.runtime import jax_device, precision_scope  # noqa: E402
from rosetta.spec import ops  # noqa: E402
from rosetta.spec.workload import Workload  # noqa: E402

NAME = "jax"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
LAYOUT = {"cpu": "NHWC", "cuda": "NHWC"}  # images; sequences run time-major


def available() -> tuple[bool, str]:
    """Whether jax imports and has a CPU backend here."""
    try:
        jax.devices("cpu")
    except RuntimeError as exc:  # pragma: no cover - a broken install
        return False, f"jax has no CPU backend: {exc}"
    return True, ""


def versions() -> dict[str, str]:
    """jax, jaxlib, flax and optax versions (flax is used by the hand-written benchmarks)."""
    out = {}
    for dist in ("jax", "jaxlib", "flax", "optax"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def cuda_available() -> bool:
    """Whether jax sees a CUDA GPU (False with a CPU-only jaxlib)."""
    return runtime.cuda_available()


def build(
    workload: Workload,
    params: Params,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    layout: str | None = None,
    conv_weight_grad: str = "auto",
    gru_unroll: int = lowering.GRU_UNROLL,
) -> JaxModel:
    """Lower ``workload`` to jitted JAX programs holding ``params`` (canonical names).

    ``layout`` (``"NHWC"``/``"NCHW"``), ``conv_weight_grad`` (``"auto"``/``"xla"``/``"gemm"``) and
    ``gru_unroll`` override the measured defaults, for the benchmarks that measure them."""
    return JaxModel(
        workload,
        params,
        dtype=dtype,
        device=device,
        seed=seed,
        layout=layout or LAYOUT.get(device, "NHWC"),
        settings=SETTINGS,
        conv_weight_grad=conv_weight_grad,
        gru_unroll=gru_unroll,
    )


def run_op(
    op: object,
    x: np.ndarray,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    training: bool = False,
) -> np.ndarray:
    """One parameter-free op through the lowering table, canonical NumPy in and out."""
    if not isinstance(op, PARAM_FREE_OPS) or type(op) not in lowering.LOWERINGS:
        raise unsupported(NAME, op)
    layout = LAYOUT.get(device, "NHWC")
    with precision_scope(dtype):
        b = lowering.Builder(layout, jax.numpy.dtype(dtype))
        fn = lowering.LOWERINGS[type(op)](op, b)
        xa = np.asarray(x, dtype=dtype)
        xn = image_to_native(xa, layout) if xa.ndim == 4 else xa
        key = jax.random.key(seed) if training else None
        y = np.asarray(fn({}, jax.device_put(xn, jax_device(device)), lowering.Run(training, key)))
    if isinstance(op, ops.Flatten) and xa.ndim == 4:
        return flat_to_canonical(y, xa.shape[1:], layout)
    return image_to_canonical(y, layout) if y.ndim == 4 else y
