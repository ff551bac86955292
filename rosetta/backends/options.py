"""A framework's settings belong to its backend: each backend package declares its ``OPTIONS``
(name, values, default, what each does, the measurement that chose the default) and the core
carries one opaque mapping, validated here once, at plan time, by the backend's declaration.

``rosetta bench --option torch.compile=off`` (repeatable) sets one; the older flags
(``--torch-compile``, ``--paddle-static``, ``--keras-step``, ``--pytensor-linker``) are
spellings of these options (:data:`SPELLINGS`). A cell's runtime holds its own backend's options
(``Runtime.options``) and the backend reads them with ``runtime.option(name)``; the manifest
records them. The runner, the plan, the CLI core and the run folder name no framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rosetta.errors import BackendError


@dataclass(frozen=True)
class Option:
    """One setting of a backend's framework."""

    name: str  # e.g. "compile"
    values: tuple[str, ...]  # e.g. ("default", "on", "off")
    default: str  # the measured choice ("default": the backend decides per task and dtype)
    doc: str  # what each value does
    measured: str = ""  # the measurement that chose the default (METHODOLOGY.md, a benchmark)


#: the older flags of ``rosetta bench``, each a spelling of one option
SPELLINGS = {
    "torch_compile": ("torch", "compile"),
    "paddle_static": ("paddle", "static"),
    "keras_step": (("keras_jax", "keras_torch"), "step"),
    "pytensor_linker": ("pytensor", "linker"),
}


def check(backend: str, values: Mapping[str, str], declared: Iterable[Option]) -> dict[str, str]:
    """``values`` (option name -> value) for ``backend``, each checked against what it
    ``declared`` (its package's ``OPTIONS``): an unknown name or value is one ``BackendError``
    naming the valid ones."""
    options = {o.name: o for o in declared}
    out = {}
    for name, value in values.items():
        if name not in options:
            valid = ", ".join(options) or "none"
            raise BackendError(f"backend {backend!r} has no option {name!r} (its options: {valid})")
        if value not in options[name].values:
            raise BackendError(
                f"option {backend}.{name}: {value!r} is not one of "
                f"{', '.join(options[name].values)}"
            )
        out[name] = value
    return out


def parse(specs: Iterable[str], declared: Mapping[str, Iterable[Option]]) -> dict[str, dict]:
    """``--option`` values (``backend.name=value``) as ``{backend: {name: value}}``, each checked
    against what its backend declares (``declared``: backend -> its ``OPTIONS``, every registered
    backend); a malformed one is one line."""
    known = list(declared)
    out: dict[str, dict[str, str]] = {}
    for spec in specs:
        target, sep, value = spec.partition("=")
        backend, dot, name = target.partition(".")
        if not sep or not dot or not backend or not name or not value:
            raise BackendError(
                f"--option {spec!r}: expected BACKEND.NAME=VALUE (e.g. torch.compile=off)"
            )
        if backend not in known:
            raise BackendError(f"--option {spec!r}: unknown backend {backend!r}")
        out.setdefault(backend, {}).update(check(backend, {name: value}, declared[backend]))
    return out


def spelled(flag: str, value: str) -> list[str]:
    """An older flag's value as ``--option`` specs (``--keras-step`` sets both Keras engines)."""
    backends_, name = SPELLINGS[flag]
    targets = backends_ if isinstance(backends_, tuple) else (backends_,)
    return [f"{b}.{name}={value}" for b in targets]


def in_effect(backend: str, package, asked: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Every option ``package`` (a backend package) declares, at the value ``asked`` or its
    default, checked: what a configured runtime holds (``Runtime.options``)."""
    options = tuple(getattr(package, "OPTIONS", ()))
    chosen = check(backend, asked, options)
    return tuple(sorted((o.name, chosen.get(o.name, o.default)) for o in options))
