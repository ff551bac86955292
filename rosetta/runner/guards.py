"""Checks of ``rosetta bench`` options that need the machine: each refuses with one line before
anything runs (threads beyond the cores, CUDA asked for where none is visible, an address-space
cap the OS cannot set, a report folder that is a file, an empty path)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path

from rosetta.datasets.paths import probe_writable
from rosetta.errors import RosettaError
from rosetta.runtime import usable_cores

#: x86-64 and arm64 user space is 128 TiB (47 bits); no cap above it can mean anything
MAX_ADDRESS_SPACE = 2**47
MAX_THREADS = 1024  # even with --oversubscribe: more is a typo, not a benchmark


def parse_threads(text: str, oversubscribe: bool) -> tuple[int | None, ...]:
    """``--threads``: a comma list of counts from 1 to the usable cores (to ``MAX_THREADS`` with
    ``--oversubscribe``), ``all`` meaning every usable core. The one place a thread option is
    checked; ``all`` becomes ``None``, the one spelling of "all cores" from here on (the cell's
    ``Runtime`` request asks for ``None`` and records the number in effect)."""
    out: list[int | None] = []
    cores = usable_cores()
    valid = f"give counts 1..{cores} or 'all', e.g. --threads 1,all"
    for item in (t.strip() for t in text.split(",")):
        if item == "all":
            out.append(None)
            continue
        try:
            n = int(item)
        except ValueError:
            raise RosettaError(
                f"--threads: expected an integer, got {item[:30]!r}; {valid}"
            ) from None
        if n < 1 or n > MAX_THREADS:
            raise RosettaError(
                f"--threads: must be an integer >= 1 and <= {MAX_THREADS}, got {item[:30]}; {valid}"
            )
        check_threads(n, oversubscribe)
        out.append(n)
    return tuple(dict.fromkeys(out))


def check_threads(threads: int | None, oversubscribe: bool) -> None:
    """``--threads`` may not exceed the usable cores unless ``--oversubscribe`` says so."""
    if threads is None:
        return
    cores = usable_cores()
    if threads > cores and not oversubscribe:
        raise RosettaError(
            f"--threads {threads} is more than the {cores} usable cores of this machine; "
            f"use at most {cores}, or add --oversubscribe to measure an oversubscribed run"
        )


def check_memory_limit(mb: int | None) -> None:
    """``--memory-limit-mb`` must be a cap this process may set (below its own hard limit and
    the address space), or the cell's ``preexec_fn`` would fail instead."""
    if mb is None:
        return
    limit = mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = MAX_ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(hard, MAX_ADDRESS_SPACE)
    if limit > ceiling:
        raise RosettaError(
            f"--memory-limit-mb {mb} is beyond the address space this process may use "
            f"({ceiling // 2**20} MB); give a smaller cap, or none"
        )


def nonempty_path(text: str) -> Path:
    """An ``argparse`` type: a path that is not the empty string (``Path('')`` is ``.``)."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name a folder")
    return Path(text)


def check_report_dir(path: Path) -> Path:
    """Prove the report folder usable before the run, creating nothing (as the results dir)."""
    path = Path(path).absolute()
    fix = "choose a writable folder with --report-dir or $ROSETTA_REPORT_DIR, or --no-report"
    check_no_loop(path, "report directory", fix)
    if path.exists() and not path.is_dir():
        raise RosettaError(f"report directory {path} is a file, not a folder; {fix}")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise RosettaError(f"report directory {path} cannot be created under a file; {fix}")
    try:
        probe_writable(probe)
    except OSError as exc:
        raise RosettaError(
            f"report directory {path} is not usable ({exc.strerror}); {fix}"
        ) from None
    return path


def check_no_loop(path: Path, what: str, fix: str) -> None:
    """Refuse a path one of whose components is a symlink that resolves nowhere (a loop or a
    dangling link), which ``exists()`` reports as merely missing."""
    for p in (path, *path.parents):
        if p.is_symlink() and not p.exists():
            try:
                p.resolve(strict=True)
                why = "a dangling symlink"
            except RuntimeError:
                why = "a symlink loop"
            except OSError as exc:
                why = "a symlink loop" if "loop" in str(exc).lower() else "a dangling symlink"
            raise RosettaError(f"{what} {path}: {p} is {why}; {fix}")


def check_model_memory(workload, dtype: str) -> None:
    """Refuse a workload whose parameters alone (with gradients, optimiser state and the gate's
    float64 copy) exceed this machine's memory, before any cell starts and fails inside."""
    from rosetta.spec.limits import machine_memory_bytes, model_bytes

    total = machine_memory_bytes()
    values = workload.num_params + workload.num_buffers
    need = model_bytes(values, dtype)
    if total is not None and need > total:
        raise RosettaError(
            f"workload {workload.name!r} has {values:,} parameter values: at least "
            f"{need / 2**30:.1f} GiB in {dtype} (weights, gradients, optimiser state, the gate's "
            f"float64 copy), more than this machine's {total / 2**30:.1f} GiB; shrink the spec"
        )


def cuda_visible() -> tuple[bool, str]:
    """Whether this machine shows a CUDA GPU, asked without a framework (``nvidia-smi -L``,
    ``CUDA_VISIBLE_DEVICES``), and what it saw: how ``--device cuda`` is refused up front and
    how the start banner says what ``auto`` resolves to here."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        return False, f"CUDA_VISIBLE_DEVICES={hidden.strip()!r} hides every GPU"
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False, "no NVIDIA driver (nvidia-smi) on this machine"
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"nvidia-smi failed ({type(exc).__name__})"
    gpus = [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
    if out.returncode != 0 or not gpus:
        return False, "nvidia-smi lists no GPU"
    return True, gpus[0].split(" (UUID")[0]
