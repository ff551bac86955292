"""Helpers of the bench tests: small synthetic data once per session, the fault backend's env."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fault_env(monkeypatch, fault: str = "") -> None:
    """Register ``tests.fault_backend`` as backend ``fault`` for this process and its children."""
    import os

    monkeypatch.setenv("ROSETTA_EXTRA_BACKENDS", "fault=tests.fault_backend")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("ROSETTA_FAULT", fault)


def bench(tmp_path, data, *args: str) -> int:
    """``rosetta bench`` in this process on the ci profile: records in ``tmp_path/results``, data
    from ``data``, no HTML report (``args`` come last, so a test may name its own report folder
    or executor). The one helper every bench test calls."""
    from rosetta.cli import main

    argv = ["bench", "--profile", "ci", "--results-dir", str(tmp_path / "results"),
            "--data-dir", str(data), "--no-report", *args]  # fmt: skip
    return main(argv)


def run_records(tmp_path, run_id: str) -> dict[str, dict]:
    """Every cell record of run ``run_id`` (under ``tmp_path/results``) by its key."""
    import json

    run = tmp_path / "results" / run_id
    skip = ("run.json", "index.json")
    return {p.stem: json.loads(p.read_text()) for p in run.glob("*.json") if p.name not in skip}
