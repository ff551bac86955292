"""The JAX process settings: XLA flags, platforms, CPU threads, the float64 scope, devices.

JAX reads ``XLA_FLAGS`` and ``JAX_PLATFORMS`` once, when its backends are first initialised (the
first array or ``jax.devices()`` call after ``import jax``). ``configure()`` therefore runs when
``rosetta.backends.jax`` is imported, before that package imports ``jax``:

- ``JAX_PLATFORMS``: left alone when the user set it; otherwise ``"cpu"``, or ``"cuda,cpu"`` when
  a CUDA plugin for jaxlib is installed (so ``--device cuda`` can find the GPU and a CPU-only
  machine never probes for one).
- CPU threads (``$ROSETTA_THREADS``, the runner's single setting): XLA:CPU has no thread-count
  flag; its intra-op pool is sized from the CPU cores the process may run on. So ``n`` threads
  below the core count pin the process to ``n`` cores (``os.sched_setaffinity``), and ``n = 1``
  also turns off Eigen's multi-threading (``--xla_cpu_multi_thread_eigen=false``). The runner runs
  one cell per process, so the pinning touches nothing else it measures.
- If ``jax`` was imported (and initialised) before this module, the flags come too late: the
  thread setting and the platforms then cannot take effect. ``configure()`` notices it and
  ``SETTINGS.note`` says so; the manifest carries that note, so a record never claims a setting
  that did not apply. (Tests that import several backends in one process do not set threads.)

float64 needs ``jax_enable_x64``, a process-wide flag. It is contained with ``jax.enable_x64``,
JAX's thread-local context: a float64 model enters it around every call that makes or runs JAX
arrays (``precision_scope``), and a float32 model names ``float32`` on every array it makes, so
the flag's value never changes a float32 model's arrays or results.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from rosetta.backends.base import threads_setting

CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_plugins.xla_cuda12")


@dataclass(frozen=True)
class Settings:
    """What ``configure()`` decided, for the manifest."""

    xla_flags: str  # XLA_FLAGS as jax will read it
    platforms: str  # JAX_PLATFORMS as jax will read it
    threads: int  # CPU cores XLA's intra-op pool may use
    pinned: bool  # whether the process was pinned to ``threads`` cores
    note: str = ""  # why a setting could not take effect ('' when all did)


def _has_cuda_plugin() -> bool:
    for name in CUDA_PLUGINS:
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def configure() -> Settings:
    """Set ``XLA_FLAGS``/``JAX_PLATFORMS`` and the CPU threads before jax initialises."""
    note = ""
    late = "jax" in sys.modules
    if late:
        note = "jax was imported before rosetta.backends.jax: XLA flags and threads may not apply"
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if not platforms:
        platforms = "cuda,cpu" if _has_cuda_plugin() else "cpu"
        os.environ["JAX_PLATFORMS"] = platforms
    flags = os.environ.get("XLA_FLAGS", "").split()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    n = threads_setting()
    pinned = False
    if n is not None and cores and n < len(cores):
        os.sched_setaffinity(0, cores[:n])
        pinned = True
    if n == 1 and not any(f.startswith("--xla_cpu_multi_thread_eigen") for f in flags):
        flags.append("--xla_cpu_multi_thread_eigen=false")
    os.environ["XLA_FLAGS"] = " ".join(flags)
    used = n if pinned else len(cores) or (os.cpu_count() or 1)
    return Settings(os.environ["XLA_FLAGS"], platforms, used, pinned, note)


@contextlib.contextmanager
def precision_scope(dtype: str) -> Iterator[None]:
    """``jax_enable_x64`` on inside the block for float64, untouched for float32."""
    if dtype != "float64":
        yield
        return
    import jax

    with jax.enable_x64(True):
        yield


def cuda_available() -> bool:
    """Whether jax sees a CUDA GPU (False on a CPU-only jaxlib, without raising)."""
    import jax

    try:
        return len(jax.devices("cuda")) > 0
    except RuntimeError:
        return False


def jax_device(device: str):
    """The ``jax.Device`` for ``"cpu"`` or ``"cuda"``, or a ``BackendError`` saying why not."""
    import jax

    from rosetta.errors import BackendError

    if device == "cpu":
        return jax.devices("cpu")[0]
    if device == "cuda":
        if not cuda_available():
            raise BackendError(
                "backend 'jax': device 'cuda' asked for, but jax sees no CUDA GPU (install "
                f"'jax[cuda12]' and check JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r})"
            )
        return jax.devices("cuda")[0]
    raise BackendError(f"backend 'jax' runs on 'cpu' or 'cuda', not {device!r}")
