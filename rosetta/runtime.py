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
#: torch's compile switch (``Runtime.torch_compile``): ``default`` is the measured choice per
#: (task, dtype) (:func:`torch_compile_in_effect`); ``on`` and ``off`` override it
TORCH_COMPILE = ("default", "on", "off")
#: what ``Runtime.request`` asks for when its caller names no compile setting; the test suite's
#: fixture (``tests/conftest.py``) makes it ``off`` so that its many builds stay eager
TORCH_COMPILE_DEFAULT = "default"
#: Paddle's compiled path (``Runtime.paddle_static``: ``paddle.jit.to_static``): ``default`` is
#: the choice per (task, dtype) (:func:`paddle_static_in_effect`); ``on`` and ``off`` override it
PADDLE_STATIC = ("default", "on", "off")
#: Keras' training step on the JAX and PyTorch engines (``Runtime.keras_step``): ``default`` is
#: each engine's measured choice (``rosetta/backends/keras_common/model.py``); ``keras`` is
#: Keras' own training API (``compile`` + ``train_on_batch``), ``custom`` the backend's own step
#: (JAX: a jitted stateless step; PyTorch: an eager ``backward`` and ``optimizer.apply``)
KERAS_STEP = ("default", "keras", "custom")
#: PyTensor's linker (``Runtime.pytensor_linker``): ``default`` is ``cvm`` (C ops under the C VM)
#: where a C++ compiler exists, else ``numba`` (``rosetta/backends/pytensor/runtime.py``)
PYTENSOR_LINKERS = ("default", "cvm", "numba")


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Runtime:
    """What one cell runs under. As a *request* ``device`` may be ``auto`` and ``threads``
    ``None`` (all usable cores); as returned by ``configure`` every field is what is in effect
    (``torch_compile`` and ``paddle_static`` stay the policy: each build resolves it for its own
    task (and dtype), :func:`torch_compile_in_effect`, :func:`paddle_static_in_effect`, and its
    manifest says what it chose and why)."""

    backend: str
    device: str = "cpu"  # cpu | cuda once resolved (auto only in a request)
    device_reason: str = ""  # why this device: "asked for cpu", "auto: no CUDA GPU visible"
    threads: int | None = None  # intra-op threads in effect (None in a request: all cores)
    dtype: str = "float32"  # parameter and compute dtype
    precision: str = "fp32"  # numeric policy (PRECISIONS)
    tf32: bool = False  # TF32 allowed for fp32 matmul/conv on CUDA (off: fp32 means fp32)
    seed: int = 0  # drives every random stream: weights, sample order, dropout
    torch_compile: str = "default"  # torch.compile: default (per task, dtype) | on | off
    paddle_static: str = "default"  # paddle.jit.to_static: default (per task, dtype) | on | off
    keras_step: str = "default"  # Keras on JAX/PyTorch: default (per engine) | keras | custom
    pytensor_linker: str = "default"  # PyTensor's linker: default | cvm | numba

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
        torch_compile: str | None = None,
        paddle_static: str | None = None,
        keras_step: str = "default",
        pytensor_linker: str = "default",
    ) -> Runtime:
        """A validated request; bad values are one ``BackendError`` naming the valid ones.
        ``torch_compile=None`` asks for :data:`TORCH_COMPILE_DEFAULT`, ``paddle_static=None``
        for ``default``."""
        if device not in DEVICES:
            raise BackendError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
        if dtype not in DTYPES:
            raise BackendError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
        check_precision(precision)
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise BackendError(f"threads must be a positive integer, got {threads!r}")
        if tf32 and device == "cpu":
            raise BackendError("--tf32 applies to CUDA only; drop it or use --device cuda/auto")
        compile_ = TORCH_COMPILE_DEFAULT if torch_compile is None else torch_compile
        if compile_ not in TORCH_COMPILE:
            raise BackendError(
                f"unknown torch compile setting {compile_!r}; valid: {', '.join(TORCH_COMPILE)}"
            )
        static = "default" if paddle_static is None else paddle_static
        if static not in PADDLE_STATIC:
            raise BackendError(
                f"unknown paddle static setting {static!r}; valid: {', '.join(PADDLE_STATIC)}"
            )
        if keras_step not in KERAS_STEP:
            raise BackendError(
                f"unknown Keras step setting {keras_step!r}; valid: {', '.join(KERAS_STEP)}"
            )
        if pytensor_linker not in PYTENSOR_LINKERS:
            raise BackendError(
                f"unknown PyTensor linker {pytensor_linker!r}; "
                f"valid: {', '.join(PYTENSOR_LINKERS)}"
            )
        return cls(
            backend=backend,
            device=device,
            threads=None if threads is None else int(threads),
            dtype=dtype,
            precision=precision,
            tf32=bool(tf32),
            seed=int(seed),
            torch_compile=compile_,
            paddle_static=static,
            keras_step=keras_step,
            pytensor_linker=pytensor_linker,
        )

    @property
    def wanted_threads(self) -> int:
        """The thread count a request asks for (all usable cores when it says ``None``)."""
        return self.threads or usable_cores()

    def resolved(self, **in_effect) -> Runtime:
        """This runtime with the values read back from the framework."""
        return replace(self, **in_effect)

    def as_dict(self) -> dict:
        """Plain-dict form for records and manifests."""
        return asdict(self)


def check_precision(name: str) -> str:
    """``name`` if it is a known policy, else one ``BackendError`` naming the valid ones."""
    if name not in PRECISIONS:
        raise BackendError(f"unknown precision {name!r}; valid: {', '.join(PRECISIONS)}")
    return name


def torch_compile_in_effect(setting: str, task: str, dtype: str) -> tuple[bool, str]:
    """Whether a torch build compiles its timed program (``torch.compile``), and why: ``on`` and
    ``off`` are the user's (``--torch-compile``); ``default`` compiles a forward-only (features)
    float32 program only. Training gains nothing measured and pays minutes of inductor builds
    (``rosetta/backends/torch/model.py``). Whatever the setting, a float64 build runs eager
    (inductor's freezing lowers convolutions to oneDNN's packed kernels, which have no float64
    form: ``BackendCompilerFailed ... Double``), and so do the localiser's cuts of the graph
    (task ``probe``: one model per op, a diagnosis never timed; compiling each would pay inductor
    per prefix and run into dynamo's recompile limit)."""
    if task == "probe":
        return False, f"task {task!r}: a diagnostic cut of the graph (the localiser's), not timed"
    if dtype == "float64":
        return False, "float64, which inductor freezing's oneDNN convolutions do not run"
    if setting == "on":
        return True, "asked for (torch_compile on)"
    if setting == "off":
        return False, "asked for (torch_compile off)"
    if task == "train":
        return False, "default: a training step runs eager (compiling gains nothing measured)"
    return True, "default: a forward-only float32 program compiles (inductor with freezing)"


def paddle_static_in_effect(setting: str, task: str) -> tuple[bool, str]:
    """Whether a paddle build runs its layers through ``paddle.jit.to_static``, and why: ``on``
    and ``off`` are the user's (``--paddle-static``); ``default`` runs the dynamic graph, Paddle's
    own mode for training and the one its CPU kernels are written for. Measured alone on a 2-core
    Zen 4 (``python -m benchmarks fastpath_knob --backend paddle --knob paddle_static --values
    off,on``, the steady step interleaved in one process; on/off): cnn 1.002 [0.992, 1.007], gru
    0.992 [0.963, 1.042], resnet50 0.999 [0.989, 1.004]: no difference, as expected on this CPU
    build (no CINN), where a static program runs the same phi kernels and saves only Python
    dispatch, small against the convolutions and the fused GRU kernel; to_static adds its
    translation to the cold start. The localiser's cuts (task ``probe``) always run the dynamic
    graph (one model per op, never timed)."""
    if task == "probe":
        return False, f"task {task!r}: a diagnostic cut of the graph (the localiser's), not timed"
    if setting == "on":
        return True, "asked for (paddle_static on)"
    if setting == "off":
        return False, "asked for (paddle_static off)"
    return False, "default: the dynamic graph (to_static measured level with it on the CPU)"


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
