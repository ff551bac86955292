"""The runtime of one cell: resolved once, before anything is decided or built, then frozen.

A cell *asks* for a device (``cpu``, ``cuda`` or ``auto``), a thread count (or all usable
cores), a dtype, a numeric precision policy, TF32 on CUDA and a seed. Its backend *configures*
the process from that request (``module.configure(request)``): it sizes the framework's thread
pools first (XLA and OpenMP read them when they start), then resolves the device, then applies
the numeric policy, and returns the :class:`Runtime` that is **in effect**, every value read
back from the framework, never copied from the request. Everything later derives from that one
value: the model (``module.build(workload, params, runtime)``), the steady-state sampling,
the manifest's GPU facts, and the record.

Environment variables for a cell's process are made in one place, :func:`child_env`.
Nothing here imports a framework.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

from rosetta.errors import BackendError

DEVICES = ("cpu", "cuda", "auto")
DTYPES = ("float32", "float64")
#: numeric policy names (METHODOLOGY, "Points and surfaces"): ``fp32`` computes in the model's
#: dtype; ``bf16`` and ``fp16`` are mixed precision. A name here is *known*; whether a backend
#: runs it is its package's own ``PRECISIONS`` (all ``("fp32",)`` until mixed precision lands).
PRECISIONS = ("fp32", "bf16", "fp16")
#: policies only a CUDA device can run (no CPU framework computes fp16 at speed)
CUDA_ONLY_PRECISIONS = ("fp16",)
#: the variables that size the BLAS/OpenMP pools of a cell's process before NumPy loads
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Runtime:
    """What one cell runs under. As a *request* ``device`` may be ``auto`` and ``threads`` 0
    (all usable cores); as returned by ``configure`` every field is what is in effect."""

    backend: str
    device: str = "cpu"  # cpu | cuda once resolved (auto only in a request)
    device_reason: str = ""  # why this device: "asked for cpu", "auto: no CUDA GPU visible"
    threads: int = 0  # intra-op threads in effect (0 in a request: all usable cores)
    dtype: str = "float32"  # parameter and compute dtype
    precision: str = "fp32"  # numeric policy (PRECISIONS)
    tf32: bool = False  # TF32 allowed for fp32 matmul/conv on CUDA (off: fp32 means fp32)
    seed: int = 0  # drives every random stream: weights, sample order, dropout

    @classmethod
    def request(
        cls,
        backend: str,
        *,
        device: str = "cpu",
        threads: int | None = None,
        dtype: str = "float32",
        precision: str = "fp32",
        tf32: bool = False,
        seed: int = 0,
    ) -> Runtime:
        """A validated request; bad values are one ``BackendError`` naming the valid ones."""
        if device not in DEVICES:
            raise BackendError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
        if dtype not in DTYPES:
            raise BackendError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
        if precision not in PRECISIONS:
            raise BackendError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise BackendError(f"threads must be a positive integer, got {threads!r}")
        if tf32 and device == "cpu":
            raise BackendError("--tf32 applies to CUDA only; drop it or use --device cuda/auto")
        return cls(
            backend=backend,
            device=device,
            threads=int(threads or 0),
            dtype=dtype,
            precision=precision,
            tf32=bool(tf32),
            seed=int(seed),
        )

    @property
    def wanted_threads(self) -> int:
        """The thread count a request asks for (all usable cores when it says 0)."""
        return self.threads or usable_cores()

    def resolved(self, **in_effect) -> Runtime:
        """This runtime with the values read back from the framework."""
        return replace(self, **in_effect)

    def as_dict(self) -> dict:
        """Plain-dict form for records and manifests."""
        return asdict(self)


def child_env(threads: int | None, base: dict | None = None) -> dict:
    """The environment of a cell's process: ``base`` (default ``os.environ``) with the BLAS and
    OpenMP pools sized to ``threads`` (all usable cores when ``None``). The one place where a
    thread setting becomes an environment variable; backends read the ``Runtime``."""
    env = dict(os.environ if base is None else base)
    n = threads or usable_cores()
    env.update({k: str(n) for k in THREAD_VARS})
    return env
