"""The runtime of one cell: resolved once, before anything is decided or built, then frozen.

A cell *asks* for a device (``cpu``, ``cuda`` or ``auto``), a thread count (``None``: every
usable core, the one spelling of the command line's ``all`` past the command line), a dtype, a
numeric precision policy, TF32 on CUDA, torch's compile switch and a seed. Its backend *configures*
the process from that request (``module.configure(request)``): it sizes the framework's thread
pools first (XLA and OpenMP read them when they start), then resolves the device, then applies
the numeric policy, and returns the :class:`Runtime` that is **in effect**, every value read
back from the framework, never copied from the request. Everything later derives from that one
value: the model (``module.build(workload, params, runtime)``), the steady-state sampling,
the manifest's GPU facts, and the record.

Environment variables for a cell's process are made in one place, :func:`child_env`.
Whether a backend runs a precision on a device is decided in one place,
``rosetta.backends.precision_unsupported``.
Nothing here imports a framework.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rosetta.errors import BackendError

DEVICES = ("cpu", "cuda", "auto")
DTYPES = ("float32", "float64")
#: numeric policy names (METHODOLOGY, "Points and surfaces"): ``fp32`` computes in the model's
#: dtype; ``bf16`` and ``fp16`` are mixed precision. A name here is *known*; whether a backend
#: runs it is its package's own ``PRECISIONS`` (all ``("fp32",)`` until mixed precision lands).
PRECISIONS = ("fp32", "bf16", "fp16")
#: policies only a CUDA device can run (no CPU framework computes fp16 at speed)
CUDA_ONLY_PRECISIONS = ("fp16",)
#: mixed-precision policies keep float32 master weights: they need dtype float32
MIXED_PRECISIONS = ("bf16", "fp16")
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
    """What one cell runs under. As a *request* ``device`` may be ``auto`` and ``threads``
    ``None`` (all usable cores); as returned by ``configure`` every field is what is in effect.
    ``options`` are the backend's own framework settings (``rosetta.backends.options``): opaque
    here, checked by the backend's declaration, every declared one present once configured (a
    setting such as torch's ``compile: default`` stays a policy each build resolves for its own
    task and dtype, its manifest saying what it chose and why)."""

    backend: str
    device: str = "cpu"  # cpu | cuda once resolved (auto only in a request)
    device_reason: str = ""  # why this device: "asked for cpu", "auto: no CUDA GPU visible"
    threads: int | None = None  # intra-op threads in effect (None in a request: all cores)
    dtype: str = "float32"  # parameter and compute dtype
    precision: str = "fp32"  # numeric policy (PRECISIONS)
    tf32: bool = False  # TF32 allowed for fp32 matmul/conv on CUDA (off: fp32 means fp32)
    seed: int = 0  # drives every random stream: weights, sample order, dropout
    options: tuple[tuple[str, str], ...] = ()  # the backend's settings: (name, value), sorted

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
        options: Mapping[str, str] | None = None,
    ) -> Runtime:
        """A validated request; bad values are one ``BackendError`` naming the valid ones.
        ``options`` (the backend's settings by name) are checked by the backend when it
        configures (``rosetta.backends.base.configure``), which fills in its defaults."""
        if device not in DEVICES:
            raise BackendError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
        if dtype not in DTYPES:
            raise BackendError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
        check_precision(precision)
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise BackendError(f"threads must be a positive integer, got {threads!r}")
        if tf32 and device == "cpu":
            raise BackendError("--tf32 applies to CUDA only; drop it or use --device cuda/auto")
        return cls(
            backend=backend,
            device=device,
            threads=None if threads is None else int(threads),
            dtype=dtype,
            precision=precision,
            tf32=bool(tf32),
            seed=int(seed),
            options=tuple(sorted((str(k), str(v)) for k, v in (options or {}).items())),
        )

    def option(self, name: str) -> str:
        """The value of the backend's option ``name`` (every declared one is set once the backend
        configured this runtime); one ``BackendError`` where it is not."""
        for key, value in self.options:
            if key == name:
                return value
        raise BackendError(
            f"backend {self.backend!r}: option {name!r} is not set in this runtime (set: "
            f"{', '.join(k for k, _ in self.options) or 'none'}); configure() sets every one"
        )

    @property
    def wanted_threads(self) -> int:
        """The thread count a request asks for (all usable cores when it says ``None``)."""
        return self.threads or usable_cores()

    def resolved(self, **in_effect) -> Runtime:
        """This runtime with the values read back from the framework."""
        return replace(self, **in_effect)

    def as_dict(self) -> dict:
        """Plain-dict form for records and manifests (the options as a mapping)."""
        return {**asdict(self), "options": dict(self.options)}


def check_precision(name: str) -> str:
    """``name`` if it is a known policy, else one ``BackendError`` naming the valid ones."""
    if name not in PRECISIONS:
        raise BackendError(f"unknown precision {name!r}; valid: {', '.join(PRECISIONS)}")
    return name


def package_root() -> Path:
    """The folder holding the ``rosetta`` package this process imported."""
    return Path(__file__).resolve().parent.parent


def child_env(threads: int | None, base: dict | None = None) -> dict:
    """The environment of a cell's process: ``base`` (default ``os.environ``) with the BLAS and
    OpenMP pools sized to ``threads`` (all usable cores when ``None``), and the driver's own
    package root first on ``PYTHONPATH`` with ``PYTHONSAFEPATH=1`` (``python -m`` would
    otherwise put the working directory first), so that a cell imports the same ``rosetta`` as
    the driver whatever its working directory holds (``$ROSETTA_MODELS``, the spec folder, made
    absolute for the same reason: a notebook's kernel runs in the run folder). The one place
    where anything becomes an environment variable of a cell; backends read the ``Runtime``."""
    env = dict(os.environ if base is None else base)
    n = threads or usable_cores()
    env.update({k: str(n) for k in THREAD_VARS})
    root = str(package_root())
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    env["PYTHONPATH"] = os.pathsep.join([root, *rest])
    env["PYTHONSAFEPATH"] = "1"
    if env.get("ROSETTA_MODELS"):  # the driver's spec folder, whatever the cell's cwd
        env["ROSETTA_MODELS"] = str(Path(env["ROSETTA_MODELS"]).expanduser().absolute())
    return env
