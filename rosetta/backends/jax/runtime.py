"""The JAX process settings: platforms, CPU threads, TF32, the float64 scope, devices.

JAX reads ``JAX_PLATFORMS`` and ``XLA_FLAGS`` once, when it starts its clients (the first array
or ``jax.devices()`` call after ``import jax``), and XLA:CPU sizes its intra-op thread pool then,
from the CPU cores the starting thread may run on. So:

- ``JAX_PLATFORMS`` is set when this module is imported (before it imports jax): left alone when
  the user set it; otherwise ``"cpu"``, or ``"cuda,cpu"`` when a CUDA plugin for jaxlib is
  installed (so ``--device cuda`` can find the GPU and a CPU-only machine never probes for one).
- ``set_threads(n)``: XLA:CPU has no thread-count flag. ``n`` threads pin *every thread of the
  process* to the first ``n`` of the cores it started with (``os.sched_setaffinity`` per task in
  ``/proc/self/task``; a thread inherits its creator's mask). ``configure`` calls it before
  anything starts a JAX client, so XLA's pool is sized to ``n`` when it is made; should a client
  already run (several models in one test process), its pool threads are pinned too, so ``n``
  cores is still what is in effect. ``n = 1`` also turns off Eigen's multi-threading
  (``--xla_cpu_multi_thread_eigen=false``), which only a client started afterwards reads
  (``settings().note`` says when that was too late). What is returned is read back: the largest
  affinity mask among the process's threads.
- ``set_tf32(enabled, device)``: ``jax_default_matmul_precision`` is ``"highest"`` (float32
  means float32) unless TF32 is asked for on CUDA (``"tensorfloat32"``); read back from
  ``jax.config``. The lowering passes the matching ``precision`` to every dot and convolution.

float64 needs ``jax_enable_x64``, a process-wide flag. It is contained with ``jax.enable_x64``,
JAX's thread-local context: a float64 model enters it around every call that makes or runs JAX
arrays (``precision_scope``), and a float32 model names ``float32`` on every array it makes.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass

from rosetta.backends import cores
from rosetta.errors import BackendError

CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_plugins.xla_cuda12")
EIGEN_OFF = "--xla_cpu_multi_thread_eigen=false"


def _has_cuda_plugin() -> bool:
    for name in CUDA_PLUGINS:
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


if not os.environ.get("JAX_PLATFORMS"):  # before jax is imported anywhere through this package
    os.environ["JAX_PLATFORMS"] = "cuda,cpu" if _has_cuda_plugin() else "cpu"

import jax  # noqa: E402  (after JAX_PLATFORMS)


@dataclass(frozen=True)
class Settings:
    """The process facts the manifest reports besides the ``Runtime``."""

    xla_flags: str  # XLA_FLAGS as jax read (or will read) them
    platforms: str  # JAX_PLATFORMS
    pinned: bool  # whether the process is pinned to fewer cores than it started with
    note: str  # why a setting could not take effect ('' when all did)


_notes: list[str] = []


def available() -> tuple[bool, str]:
    """Whether jax imports (it did, for this module to load); no client is started here, so
    ``set_threads`` still comes first."""
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


def clients_started() -> bool:
    """Whether JAX has started its clients (and so sized XLA:CPU's pool) in this process."""
    from jax._src import xla_bridge

    probe = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(probe()) if probe else bool(getattr(xla_bridge, "_backends", {}))


def threads_in_effect() -> int:
    """The CPU cores the process's threads may run on (``rosetta.backends.cores``)."""
    return cores.in_effect()


def set_threads(n: int) -> int:
    """Pin every thread of the process to the first ``n`` starting cores (all of them when ``n``
    is at least their number); returns the cores in effect, read back (see the module doc)."""
    cores.bind(n)
    flags = os.environ.get("XLA_FLAGS", "").split()
    if n == 1 and not any(f.startswith("--xla_cpu_multi_thread_eigen") for f in flags):
        if clients_started():
            _notes.append(f"{EIGEN_OFF} not applied: JAX's CPU client had started")
        else:
            os.environ["XLA_FLAGS"] = " ".join([*flags, EIGEN_OFF])
    return threads_in_effect()


def set_tf32(enabled: bool, device: str) -> bool:
    """Default matmul precision ``tensorfloat32`` when ``enabled`` on CUDA (written, not run:
    no GPU here), ``highest`` otherwise; returns whether TF32 is in effect, read back."""
    want = "tensorfloat32" if enabled and device == "cuda" else "highest"
    jax.config.update("jax_default_matmul_precision", want)
    return jax.config.jax_default_matmul_precision == "tensorfloat32"


def settings() -> Settings:
    """XLA flags, platforms, pinning and notes, for the manifest."""
    pinned = bool(cores.START_CORES) and threads_in_effect() < len(cores.START_CORES)
    return Settings(
        os.environ.get("XLA_FLAGS", ""),
        os.environ.get("JAX_PLATFORMS", ""),
        pinned,
        "; ".join(dict.fromkeys(_notes)),
    )


@contextlib.contextmanager
def precision_scope(dtype: str) -> Iterator[None]:
    """``jax_enable_x64`` on inside the block for float64, untouched for float32."""
    if dtype != "float64":
        yield
        return
    with jax.enable_x64(True):
        yield


def cuda_available() -> bool:
    """Whether jax sees a CUDA GPU (False on a CPU-only jaxlib, without raising)."""
    try:
        return len(jax.devices("cuda")) > 0
    except RuntimeError:
        return False


def jax_device(device: str) -> jax.Device:
    """The ``jax.Device`` for a resolved ``"cpu"`` or ``"cuda"``."""
    if device == "cpu":
        return jax.devices("cpu")[0]
    if device == "cuda" and cuda_available():  # ran on an H200 (docs/gpu/)
        return jax.devices("cuda")[0]
    raise BackendError(
        f"backend 'jax': device {device!r} is not usable here (jax sees no CUDA GPU; "
        f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}); use --device cpu"
    )
