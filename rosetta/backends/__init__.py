"""Registry of backends, found by convention: ``rosetta.backends.<name>`` is backend ``<name>``.

Adding a backend is one module plus one line in ``REGISTRY``. Nothing here imports a
framework: ``status`` reads installed versions from package metadata, so ``rosetta list``
works with only NumPy installed, and ``load`` imports a backend module only when asked.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from types import ModuleType

from rosetta.errors import BackendError


@dataclass(frozen=True)
class BackendInfo:
    """What the registry knows of a backend without importing it."""

    name: str
    framework: str  # human name
    distributions: tuple[tuple[str, ...], ...]  # each entry: alternatives, one must be installed
    extra: str  # pip extra that installs it


REGISTRY: dict[str, BackendInfo] = {
    "numpy_ref": BackendInfo("numpy_ref", "NumPy (reference)", (("numpy",),), ""),
    "torch": BackendInfo("torch", "PyTorch", (("torch",),), "torch"),
    "tensorflow": BackendInfo(
        "tensorflow",
        "TensorFlow/Keras",
        (("tensorflow", "tensorflow-cpu"), ("keras",)),
        "tensorflow",
    ),
    "jax": BackendInfo("jax", "JAX/Flax", (("jax",), ("jaxlib",), ("flax",), ("optax",)), "jax"),
    "chainer": BackendInfo("chainer", "Chainer", (("chainer",),), "chainer"),
}


@dataclass(frozen=True)
class BackendStatus:
    """Whether a backend can run here, with versions, or the reason it cannot."""

    name: str
    usable: bool
    versions: tuple[tuple[str, str], ...]
    reason: str  # "" when usable


def names() -> list[str]:
    """All registered backend names, in registry order."""
    return list(REGISTRY)


def info(name: str) -> BackendInfo:
    """Registry entry of ``name``; an unknown name raises ``BackendError`` listing valid ones."""
    if name not in REGISTRY:
        raise BackendError(f"unknown backend {name!r}; valid backends: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def status(name: str) -> BackendStatus:
    """Installed versions of the backend's framework, or why it cannot run (no import done)."""
    entry = info(name)
    versions: list[tuple[str, str]] = []
    for alternatives in entry.distributions:
        found = [(d, _version(d)) for d in alternatives if _version(d)]
        if not found:
            hint = f"pip install 'rosetta[{entry.extra}]'" if entry.extra else "pip install numpy"
            return BackendStatus(
                name, False, tuple(versions), f"{alternatives[0]} is not installed ({hint})"
            )
        versions.append(found[0])
    if importlib.util.find_spec(f"rosetta.backends.{name}") is None:
        return BackendStatus(
            name, False, tuple(versions), "lowering not implemented in this version of rosetta"
        )
    return BackendStatus(name, True, tuple(versions), "")


def load(name: str) -> ModuleType:
    """Import backend module ``name``; raises ``BackendError`` with the reason if it cannot."""
    st = status(name)
    if not st.usable:
        raise BackendError(f"backend {name!r} is not usable here: {st.reason}")
    try:
        return importlib.import_module(f"rosetta.backends.{name}")
    except ImportError as exc:
        raise BackendError(f"backend {name!r} failed to import: {exc}") from None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""
