"""The framework-neutral workload spec: parse, validate, infer shapes, count, make weights.

Imports nothing but the standard library, NumPy and PyYAML (a test enforces it). Workloads are
found by convention: every ``rosetta/models/<name>.yaml`` is the workload ``<name>``.
"""

from __future__ import annotations

import os
from pathlib import Path

from rosetta.errors import SpecError
from rosetta.spec.loader import load_workload
from rosetta.spec.weights import canonical_weights, check_weights, load_weights, save_weights
from rosetta.spec.workload import Profile, Tolerance, Tolerances, Workload

__all__ = [
    "Profile",
    "Tolerance",
    "Tolerances",
    "Workload",
    "canonical_weights",
    "check_weights",
    "get_workload",
    "load_weights",
    "load_workload",
    "models_dir",
    "save_weights",
    "workload_names",
]


def models_dir() -> Path:
    """Folder of the specs: ``$ROSETTA_MODELS``, else ``rosetta/models/`` (package data)."""
    env = os.environ.get("ROSETTA_MODELS")
    if not env:
        return Path(__file__).resolve().parents[1] / "models"
    path = Path(env).expanduser()
    if not path.is_dir():
        raise SpecError(
            f"$ROSETTA_MODELS={env!r} is not a folder; point it at a folder of workload specs "
            f"(*.yaml) or unset it to use the built-in workloads"
        )
    return path


def workload_names() -> list[str]:
    """Names of all workloads, from ``rosetta/models/*.yaml``, sorted."""
    return sorted(p.stem for p in models_dir().glob("*.yaml"))


def get_workload(name: str) -> Workload:
    """Load workload ``name``; an unknown name raises ``SpecError`` listing the valid ones."""
    names = workload_names()
    if name not in names:
        raise SpecError(
            f"unknown workload {name!r}; valid workloads: {', '.join(names) or '(none found)'}"
            f" (in {models_dir()})"
        )
    return load_workload(models_dir() / f"{name}.yaml")
