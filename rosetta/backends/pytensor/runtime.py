"""PyTensor's process settings: the linker, NumPy's BLAS threads, no device but the CPU, no TF32.

**The linker** (the backend's option ``linker``: ``default`` | ``cvm`` | ``numba``). PyTensor turns
a graph into a program by a *linker*: ``cvm`` runs each op's C implementation (compiled by the
system C++ compiler, ``pytensor.config.cxx``) under PyTensor's C virtual machine, ``numba``
compiles each op (and the loop between them) with Numba's LLVM. PyTensor 3's own default
(``config.linker = "auto"``, its ``FAST_RUN``) is Numba; Rosetta's ``default`` resolves to ``cvm``
where a C++ compiler is present, else ``numba``. Why: compile cost. Each cell is a fresh process
that compiles its programs in its cold start; the C linker compiles each op's C module once and
caches it on disk by content (PyTensor's compile directory), so later cells and later graphs
reuse them, while Numba compiled each new graph for minutes here (the Numba tests of
``tests/test_backend_pytensor.py``: one padded max-pool, or a two-layer MLP's three programs,
took minutes on the loaded 2-core machine, where the C linker compiled the CNN's three programs
in about a minute and a half). Steady-state speed, measured alone on a 2-core Zen 4 (``python -m
benchmarks fastpath_knob --backend pytensor --knob pytensor_linker --values cvm,numba``, the train
step interleaved in one process): numba/cvm 0.993 [0.857, 1.129] on the GRU and 0.894 [0.799,
1.467] on the CNN, no clear difference either way, for a cold start of 60.5 s (GRU) and 308.7 s
(CNN) under Numba against 2.9 s and 6.0 s under the C linker with its cache. ``rosetta bench
--pytensor-linker numba`` runs the other one; the manifest records the linker, the compiler and
this reason.

**Compile directory**: PyTensor's default (``pytensor.config.compiledir``, under
``~/.pytensor``), shared by every cell on the machine and locked by PyTensor itself; recorded in
the manifest. A run's own temporary folder would make every cell compile every C module again.

**BLAS**: PyTensor links its C ``Gemm``/``Dot22`` to a BLAS only when it finds one to link
(``blas__ldflags``); a pip install finds none, and its C BLAS ops then call NumPy's C-API
matrix products (the OpenBLAS bundled in the NumPy wheel). ``set_threads`` sizes that pool through
threadpoolctl (and Numba's pool, when the Numba linker runs) and reads the count back.

Nothing here imports PyTensor at module import: ``available()`` is the first to try.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from rosetta.errors import BackendError

#: the BLAS warning PyTensor prints at import on a pip install (recorded in the manifest instead)
_BLAS_WARNING = "PyTensor could not link to a BLAS installation"

#: the linkers (the backend's option ``linker``, declared in its ``__init__.py``)
LINKERS = ("default", "cvm", "numba")


@cache
def load() -> ModuleType:
    """``import pytensor`` once, its BLAS warning kept out of the output (the manifest says it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=f".*{_BLAS_WARNING}.*")
        import pytensor
        import pytensor.tensor  # noqa: F401

        _ = pytensor.config.blas__ldflags  # resolved on first read: where the warning is raised
    return pytensor


def available() -> tuple[bool, str]:
    """Whether PyTensor imports here, and why not."""
    try:
        load()
    except Exception as exc:  # ImportError, or a broken dependency (numba, scipy)
        return False, f"pytensor does not import: {type(exc).__name__}: {exc}"
    return True, ""


def versions() -> dict[str, str]:
    """PyTensor's version, and those of Numba, NumPy and SciPy (package metadata)."""
    out = {}
    for dist in ("pytensor", "numba", "numpy", "scipy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def cuda_available() -> bool:
    """PyTensor 3 has no CUDA backend of its own (its GPU path was Theano's gpuarray, removed)."""
    return False


def blas_pools() -> list[dict]:
    """threadpoolctl's view of the BLAS libraries loaded in this process."""
    from threadpoolctl import threadpool_info

    return [p for p in threadpool_info() if p.get("user_api") == "blas"]


def set_threads(n: int) -> int:
    """Size NumPy's BLAS pool (PyTensor's matrix products here) to ``n``, and Numba's pool
    where Numba is loaded (``numba_threads`` again once the Numba linker has loaded it);
    returns the BLAS threads in effect, read back from the library."""
    from threadpoolctl import threadpool_limits

    load()
    threadpool_limits(limits=n, user_api="blas")
    if "numba" in sys.modules:  # importing it only to size an unused pool costs seconds
        numba_threads(n)
    return min((int(p["num_threads"]) for p in blas_pools()), default=1)


def numba_threads(n: int) -> int:
    """Size Numba's pool to ``n`` (at most the pool it started with); returns it, read back."""
    import numba

    with contextlib.suppress(ValueError):
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    return int(numba.get_num_threads())


def set_tf32(enabled: bool, device: str) -> bool:
    """PyTensor has no TF32: always off (``configure`` refuses ``--tf32`` off CUDA)."""
    return False


@dataclass(frozen=True)
class Linker:
    """The linker in effect for one model, and why."""

    name: str  # "cvm" | "numba"
    reason: str


def compiler() -> str:
    """The C++ compiler PyTensor's C linker uses (``config.cxx``), or ``""`` when none."""
    cxx = str(load().config.cxx or "")
    return cxx if cxx and shutil.which(cxx) else ""


@cache
def compiler_version(cxx: str) -> str:
    """The first line of ``cxx --version`` (e.g. ``g++ (Debian 12.2.0-14) 12.2.0``)."""
    if not cxx:
        return "none"
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{cxx} (version unknown: {type(exc).__name__})"
    first = (done.stdout or done.stderr).strip().splitlines()
    return first[0] if first else cxx


def resolve_linker(setting: str) -> Linker:
    """The linker for ``setting`` (``default`` | ``cvm`` | ``numba``), or one clear error."""
    if setting not in LINKERS:
        raise BackendError(f"unknown PyTensor linker {setting!r}; valid: {', '.join(LINKERS)}")
    cxx = compiler()
    if setting == "cvm" and not cxx:
        raise BackendError(
            "--pytensor-linker cvm needs a C++ compiler (pytensor.config.cxx is empty); "
            "install g++ or use --pytensor-linker numba"
        )
    if setting != "default":
        return Linker(setting, f"asked for (pytensor_linker {setting})")
    if cxx:
        return Linker(
            "cvm",
            "default: a C++ compiler is present; C ops under the C VM, their modules cached on "
            "disk across cells (PyTensor 3's own default, Numba, compiles each new graph for "
            "minutes); steady-state speed of the two not measured here",
        )
    return Linker("numba", "default: no C++ compiler here, so Numba (PyTensor's compiled path "
                  "without one)")  # fmt: skip


def mode(linker: Linker, threads: int):
    """The ``pytensor.compile.Mode`` of ``linker``: FAST_RUN's rewrites with that linker (Numba's
    thread pool sized to ``threads``, the runtime's)."""
    from pytensor.compile.mode import Mode, get_mode

    load()
    if linker.name == "numba":
        mode = get_mode("NUMBA")
        numba_threads(threads)  # the NUMBA mode has loaded numba: its pool to the runtime's
        return mode
    return Mode(linker="cvm", optimizer="fast_run")


def settings() -> dict[str, str]:
    """The config facts the manifest records: compiler, compile dir, BLAS link flags."""
    config = load().config
    cxx = compiler()
    return {
        "compiler": compiler_version(cxx) if cxx else "none (no C++ compiler found)",
        "compiledir": f"{config.compiledir} (PyTensor's default, shared across cells)",
        "blas": (
            f"linked: {config.blas__ldflags}"
            if config.blas__ldflags
            else "none linked (pip install): Dot22, BatchedDot and Softmax run Python's perform "
            "(NumPy products; ops_run lists them), the other C ops NumPy's C-API"
        ),
        "floatX": str(config.floatX),
    }
