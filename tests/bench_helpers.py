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
