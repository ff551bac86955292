"""The matrix: every (workload, backend) cell in its own process, each leaving exactly one record.

A cell that crashes, hangs past its timeout, or whose backend is not installed still gets a
record (``failed``, ``timeout``, ``skipped``) with a one-line reason, so nothing already
measured is lost and the report shows every cell. Re-running with the same run id resumes: cells
that already have a record are not run again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rosetta import backends
from rosetta.runner import records
from rosetta.runner.config import CellConfig
from rosetta.runner.manifest import THREAD_VARS


def cell_command(config: CellConfig) -> list[str]:
    """The command that runs one cell in a fresh Python process."""
    return [sys.executable, "-m", "rosetta.runner.cell", "--config", config.to_json()]


def run_matrix(
    backend_names: list[str],
    workload_names: list[str],
    profile: str,
    *,
    run_id: str,
    results_dir: Path,
    data_dir: str | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = None,
    timeout_s: float = 1800.0,
    echo: Callable[[str], None] = print,
) -> list[Path]:
    """Run every cell not yet recorded for ``run_id``; return the paths of all its records."""
    env = dict(os.environ)
    threads = threads or os.cpu_count() or 1
    env.update({k: str(threads) for k in THREAD_VARS})
    paths = []
    for workload in workload_names:
        for backend in backend_names:
            path = records.record_path(results_dir, run_id, backend, workload)
            paths.append(path)
            label = f"{backend} x {workload} ({profile})"
            if path.exists():
                echo(f"  {label}: already recorded, kept")
                continue
            st = backends.status(backend)
            if not st.usable:
                _write(path, run_id, backend, workload, profile, "skipped", st.reason)
                echo(f"  {label}: skipped ({st.reason})")
                continue
            echo(f"  {label}: running ...")
            config = CellConfig(
                backend=backend,
                workload=workload,
                profile=profile,
                run_id=run_id,
                out=str(path),
                data_dir=None if data_dir is None else str(data_dir),
                dtype=dtype,
                device=device,
                seed=seed,
                threads=threads,
            )
            cmd = cell_command(config)
            try:
                proc = subprocess.run(
                    cmd, env=env, capture_output=True, text=True, timeout=timeout_s
                )
            except subprocess.TimeoutExpired:
                _write(
                    path,
                    run_id,
                    backend,
                    workload,
                    profile,
                    "timeout",
                    f"cell exceeded its {timeout_s:.0f} s timeout and was killed",
                )
                echo(f"  {label}: TIMEOUT after {timeout_s:.0f} s")
                continue
            if proc.returncode == 0 and path.exists():
                echo(f"  {label}: done")
                continue
            reason = _last_line(proc.stderr) or f"exit status {proc.returncode}"
            _write(path, run_id, backend, workload, profile, "failed", reason)
            echo(f"  {label}: FAILED: {reason}")
    return paths


def _write(
    path: Path, run_id: str, backend: str, workload: str, profile: str, status: str, reason: str
) -> None:
    rec = records.make_record(
        backend=backend,
        workload=workload,
        profile=profile,
        status=status,
        error=reason,
        run_id=run_id,
    )
    records.write_record(path, rec)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("rosetta: error: ") if lines else ""
