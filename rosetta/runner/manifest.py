"""The environment manifest stored with every record: what ran, where, with which settings."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path

import numpy as np

from rosetta.runtime import THREAD_VARS

#: variables that choose a BLAS kernel or pool, recorded with every cell (the platform may set
#: OPENBLAS_CORETYPE to pick an older kernel: it decides NumPy's speed, not the suite)
RECORDED_VARS = (*THREAD_VARS, "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "XLA_FLAGS")


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; platform.processor() elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_family() -> dict:
    """The CPU's vendor family, model and stepping numbers (``/proc/cpuinfo``; {} elsewhere):
    with the model name and ISA flags they say what kind of machine ran (AMD family 25 is Zen 3
    and Zen 4, 26 is Zen 5), which the measured figures cannot (a busy core reads low)."""
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = {"cpu family": "family", "model": "model", "stepping": "stepping"}.get(
                key.strip()
            )
            if key and key not in out and value.strip().isdigit():
                out[key] = int(value.strip())
            if line.strip() == "" and out:
                break  # the first processor's block
    except OSError:
        pass
    return out


def git_revision() -> str:
    """The suite's git commit (with ``-dirty`` if the tree has changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev + ("-dirty" if dirty else "")) if rev else "unknown"


def blas_info() -> str:
    """NumPy's BLAS build, one line (e.g. ``scipy-openblas 0.3.29``)."""
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - best effort: older NumPy has no dicts mode
        return "unknown"


#: NumPy's wheels ship OpenBLAS as libscipy_openblas: what numpy_ref and Chainer compute with;
#: torch (MKL/oneDNN), TensorFlow (oneDNN/Eigen) and JAX (XLA) compute with their own libraries
NUMPY_WHEEL_NOTE = ": NumPy's, which numpy_ref and Chainer compute with"
#: OpenBLAS core names whose kernels use AVX-512 (any other OpenBLAS core is AVX2 or older)
OPENBLAS_AVX512 = ("skylakex", "cooperlake", "sapphirerapids")


def cpu_flags() -> set[str]:
    """The ISA flags of this CPU (``/proc/cpuinfo``; empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def blas_kernels() -> list[dict]:
    """The BLAS libraries loaded in this process and the kernel each runs (threadpoolctl's
    ``internal_api``, ``architecture``, ``num_threads``, version, library file), read after the
    backend's framework is imported, so it is the backend's own BLAS. [] without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("internal_api", "architecture", "threading_layer", "num_threads", "version")
    return [
        {k: d.get(k) for k in keep} | {"library": Path(d.get("filepath", "")).name}
        for d in threadpool_info()
        if d.get("user_api") == "blas"
    ]


def blas_below_isa(kernels: list[dict], flags: set[str]) -> str:
    """A flag when a loaded BLAS runs a kernel below the CPU's best ISA (e.g. OpenBLAS's AVX2
    ``Haswell``/``Zen`` kernel on an AVX-512 CPU, as ``OPENBLAS_CORETYPE`` can force), naming
    the library and the variable; "" when none is known to."""
    if "avx512f" not in flags:
        return ""
    slow = [
        f"{k['library']} ({k['internal_api']} {k.get('version') or ''}"
        f"{NUMPY_WHEEL_NOTE if 'scipy_openblas' in str(k.get('library')) else ''}) runs its "
        f"{k['architecture']} kernel"
        for k in kernels
        if k.get("internal_api") == "openblas"
        and k.get("architecture")
        and str(k["architecture"]).lower() not in OPENBLAS_AVX512
    ]
    if not slow:
        return ""
    core = os.environ.get("OPENBLAS_CORETYPE")
    why = f"OPENBLAS_CORETYPE={core} is set" if core else "OpenBLAS chose it"
    return (
        f"BLAS below the CPU's ISA: {'; '.join(slow)} (AVX2) on an AVX-512 CPU; {why}. The "
        "framework is not what is slow here"
    )


def load_snapshot() -> dict:
    """The machine's load now: 1/5/15-minute load averages and the mean CPU clock (MHz) where
    Linux shows it. Shared machines are noisy; every record carries this before and after."""
    snap: dict = {"load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    try:
        mhz = [
            float(line.split(":", 1)[1])
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("cpu MHz")
        ]
        snap["cpu_mhz"] = round(sum(mhz) / len(mhz), 1) if mhz else None
    except (OSError, ValueError):
        snap["cpu_mhz"] = None
    return snap


def gpu_info() -> dict:
    """GPU model, driver and CUDA driver version from ``nvidia-smi`` ({} where there is none).

    Framework-side facts (CUDA runtime, cuDNN, TF32) come from each backend's manifest."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [r.split(", ") for r in out.stdout.strip().splitlines() if r.strip()]
    if out.returncode != 0 or not rows:
        return {}
    return {
        "gpus": [{"name": r[0], "driver": r[1], "memory": r[2]} for r in rows if len(r) == 3],
    }


def node_facts(device: str = "cpu") -> dict:
    """The machine a cell ran on: hostname, CPU model and cores, load, GPU (when a GPU cell runs,
    or under an unresolved ``auto`` when the machine shows one).

    Stored as ``manifest.node`` in every record so a run spanning several machines can be
    reported per machine; the Ray executor extends it with its node id, IP and worker pid."""
    facts = {
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_family": cpu_family(),
        "cpu_count": os.cpu_count(),
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    if device == "cuda":
        facts["gpu"] = gpu_info()
    elif device == "auto":  # an unresolved request (a Ray node before its cell): a GPU if seen
        gpu = gpu_info()
        if gpu:
            facts["gpu"] = gpu
    return facts


def environment(device: str = "cpu") -> dict:
    """Machine and software facts common to every backend (backends add their own)."""
    env = {
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas_info(),
        "thread_env": {k: os.environ[k] for k in RECORDED_VARS if k in os.environ},
        "blas_kernels": (kernels := blas_kernels()),
        "blas_below_isa": blas_below_isa(kernels, cpu_flags()),
        "git_revision": git_revision(),
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    if device == "cuda":
        env["gpu"] = gpu_info()
    env["node"] = node_facts("cpu") | ({"gpu": env["gpu"]} if "gpu" in env else {})
    return env
