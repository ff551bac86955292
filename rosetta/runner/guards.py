"""Checks of ``rosetta bench`` options that need the machine: each refuses with one line before
anything runs (threads beyond the cores, an address-space cap the OS cannot set, a report folder
that is a file, an empty path)."""

from __future__ import annotations

import resource
from pathlib import Path

from rosetta.datasets.paths import probe_writable
from rosetta.errors import RosettaError
from rosetta.runtime import usable_cores

#: x86-64 and arm64 user space is 128 TiB (47 bits); no cap above it can mean anything
MAX_ADDRESS_SPACE = 2**47
MAX_THREADS = 1024  # even with --oversubscribe: more is a typo, not a benchmark


def check_threads(threads: int | None, oversubscribe: bool) -> None:
    """``--threads`` may not exceed the usable cores unless ``--oversubscribe`` says so."""
    if threads is None:
        return
    cores = usable_cores()
    if threads > MAX_THREADS:
        raise RosettaError(f"--threads {threads} is above {MAX_THREADS}; use at most {cores}")
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
