"""Registry of backends, found by convention: ``rosetta.backends.<name>`` is backend ``<name>``.

Adding a backend is one module plus one line in ``REGISTRY``. A backend kept outside the package
(a user's own, or the tests' fault-injecting one) is registered without editing anything by
``ROSETTA_EXTRA_BACKENDS="name=package.module,..."``. Nothing here imports a framework:
``status`` reads installed versions from package metadata, so ``rosetta list`` works with only
NumPy installed, and ``load`` imports a backend module only when asked.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from rosetta.errors import BackendError


@dataclass(frozen=True)
class BackendInfo:
    """What the registry knows of a backend without importing it."""

    name: str
    framework: str  # human name
    distributions: tuple[tuple[str, ...], ...]  # each entry: alternatives, one must be installed
    extra: str  # pip extra that installs it
    module: str = ""  # the module, if not rosetta.backends.<name>

    @property
    def module_name(self) -> str:
        """The importable module of the backend."""
        return self.module or f"rosetta.backends.{self.name}"


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
    "keras_jax": BackendInfo(
        "keras_jax", "Keras 3 on JAX", (("keras",), ("jax",), ("jaxlib",)), "jax"
    ),
    "keras_torch": BackendInfo(
        "keras_torch", "Keras 3 on PyTorch", (("keras",), ("torch",)), "torch"
    ),
    "paddle": BackendInfo(
        "paddle", "PaddlePaddle", (("paddlepaddle", "paddlepaddle-gpu"),), "paddle"
    ),
    "mindspore": BackendInfo("mindspore", "MindSpore", (("mindspore",),), "mindspore"),
    "pytensor": BackendInfo(
        "pytensor", "PyTensor (Theano's line)", (("pytensor",),), "pytensor"
    ),
    "onnxruntime": BackendInfo(
        "onnxruntime", "ONNX Runtime", (("onnxruntime",), ("onnx",)), "onnx"
    ),
    "openvino": BackendInfo("openvino", "OpenVINO", (("openvino",), ("onnx",)), "onnx"),
}


@dataclass(frozen=True)
class BackendStatus:
    """Whether a backend can run here, with versions, or the reason it cannot."""

    name: str
    usable: bool
    versions: tuple[tuple[str, str], ...]
    reason: str  # "" when usable


EXTRA_ENV = "ROSETTA_EXTRA_BACKENDS"


def _registry() -> dict[str, BackendInfo]:
    """``REGISTRY`` plus the backends named in ``$ROSETTA_EXTRA_BACKENDS``."""
    out = dict(REGISTRY)
    for item in os.environ.get(EXTRA_ENV, "").split(","):
        if not item.strip():
            continue
        name, sep, module = item.strip().partition("=")
        if not sep or not name.isidentifier() or not module:
            raise BackendError(f"${EXTRA_ENV}: expected name=package.module, got {item!r}")
        if name in REGISTRY:
            raise BackendError(
                f"${EXTRA_ENV}: {name!r} is a built-in backend and cannot be replaced; give "
                f"yours another name (built-in: {', '.join(REGISTRY)})"
            )
        out[name] = BackendInfo(name, f"{module} (extra)", (), "", module)
    return out


def names() -> list[str]:
    """All registered backend names, in registry order."""
    return list(_registry())


def source_module(name: str) -> ModuleType:
    """Backend ``name``'s ``source.py``: its one op table, ``OPS``, found from its op modules,
    and the table's text face. Backend packages and op modules import no framework at import,
    so reading it never imports one."""
    return importlib.import_module(f"{info(name).module_name}.source")


def missing_ops(name: str, workload) -> tuple[str, ...]:
    """The ops of ``workload`` (a ``Workload``) that backend ``name`` does not lower (it has no
    op module for them), once each in graph order: an op the backend declares ``UNSUPPORTED``,
    or a user's spec using an op a backend lacks. Empty when it lowers them all; a backend kept
    outside the package as one module (no folder with a ``source.py``) is not judged."""
    from rosetta.spec.graph import walk

    if not has_op_table(name):
        return ()
    entries = source_module(name).OPS.entries
    missing: dict[str, None] = {}
    for op, _, _ in walk(workload.graph, workload.input.shape):
        if type(op) not in entries:
            missing[op.OP] = None
    return tuple(missing)


def has_op_table(name: str) -> bool:
    """Whether backend ``name`` is a folder with an op table (``source.py``): every built-in one,
    and a user's backend written as one (a one-module test backend is not)."""
    try:
        found = importlib.util.find_spec(info(name).module_name)
    except ImportError:
        return False
    locations = list(found.submodule_search_locations or []) if found else []
    return bool(locations) and os.path.isfile(os.path.join(locations[0], "source.py"))


def lowering_unsupported(name: str, workload) -> str:
    """Why backend ``name`` cannot lower ``workload`` (the ops it lacks, with the reasons it
    declares in ``UNSUPPORTED``), or ``""``: the reason of a skipped cell."""
    missing = missing_ops(name, workload)
    if not missing:
        return ""
    declared = source_module(name).OPS.unsupported
    parts = [f"{op} ({declared[op]})" if op in declared else op for op in missing]
    return (
        f"backend {name!r} does not lower {', '.join(parts)} (ops of workload "
        f"{workload.name!r}); its ops are {source_module(name).OPS.package.replace('.', '/')}/"
    )


def constant(name: str, key: str, default: Any = None) -> Any:
    """A constant of backend ``name``'s package, what the rest of Rosetta reads of a backend so
    that a backend is its folder: ``PAGE_NAME`` (its column on the Rosetta page), ``COLOUR``
    (its charts' colour), ``GEMM_PROBE`` (its framework's peak probe); its file template is its
    folder's ``codegen.py``. ``default`` for a name no backend here answers to (a report of
    another installation's records). The packages import no framework, so neither does this."""
    try:
        package = importlib.import_module(info(name).module_name)
    except (BackendError, ImportError):
        return default
    return getattr(package, key, default)


def info(name: str) -> BackendInfo:
    """Registry entry of ``name``; an unknown name raises ``BackendError`` listing valid ones."""
    registry = _registry()
    if name not in registry:
        raise BackendError(f"unknown backend {name!r}; valid backends: {', '.join(registry)}")
    return registry[name]


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
    try:
        spec_found = importlib.util.find_spec(entry.module_name) is not None
    except ModuleNotFoundError:
        spec_found = False
    if not spec_found:
        why = (
            f"module {entry.module} not found (check ${EXTRA_ENV} and PYTHONPATH)"
            if entry.module
            else "lowering not implemented in this version of rosetta"
        )
        return BackendStatus(name, False, tuple(versions), why)
    if entry.module:  # a user's module: ready only if it is a backend (its contract names)
        why = _not_a_backend(entry.module)
        if why:
            return BackendStatus(name, False, tuple(versions), why)
    return BackendStatus(name, True, tuple(versions), "")


def _not_a_backend(module_name: str) -> str:
    """Why the extra module ``module_name`` is not a rosetta backend, or ``""`` (it imports
    and defines every contract name); importing it is what running it would do anyway."""
    from rosetta.backends.base import CONTRACT

    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a user's module: any failure is a reason
        return f"module {module_name} does not import ({type(exc).__name__}: {exc})"
    missing = [n for n in CONTRACT if not hasattr(module, n)]
    if missing:
        return (
            f"module {module_name} is not a rosetta backend (it lacks {', '.join(missing)}; "
            "see rosetta/backends/base.py)"
        )
    return ""


def precision_unsupported(
    name: str,
    precision: str,
    device: str,
    dtype: str = "float32",
    package: ModuleType | None = None,
) -> str:
    """Why backend ``name`` cannot run ``precision`` on ``device`` in ``dtype``, or ``""``
    (:func:`rosetta.backends.base.precision_unsupported`, the one place this is decided, given
    the backend package, imported here without its framework when the caller does not hold it)."""
    from rosetta.backends.base import precision_unsupported as decide

    package = package or importlib.import_module(info(name).module_name)
    return decide(package, name, precision, device, dtype)


def training_unsupported(name: str, package: ModuleType | None = None) -> str:
    """Why backend ``name`` cannot run a training cell, or ``""``
    (:func:`rosetta.backends.base.training_unsupported`: its package's ``FORWARD_ONLY``)."""
    from rosetta.backends.base import training_unsupported as decide

    return decide(package or importlib.import_module(info(name).module_name), name)


def dtype_unsupported(name: str, dtype: str, package: ModuleType | None = None) -> str:
    """Why backend ``name`` cannot run ``dtype``, or ``""``
    (:func:`rosetta.backends.base.dtype_unsupported`: its package's ``DTYPES``)."""
    from rosetta.backends.base import dtype_unsupported as decide

    return decide(package or importlib.import_module(info(name).module_name), name, dtype)


def load(name: str) -> ModuleType:
    """Import backend module ``name``; raises ``BackendError`` with the reason if it cannot."""
    st = status(name)
    if not st.usable:
        raise BackendError(f"backend {name!r} is not usable here: {st.reason}")
    try:
        return importlib.import_module(info(name).module_name)
    except ImportError as exc:
        raise BackendError(f"backend {name!r} failed to import: {exc}") from None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def make(
    backend: str | ModuleType,
    workload,
    params,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = None,
    precision: str = "fp32",
    tf32: bool = False,
    options: dict[str, str] | None = None,
    **build,
):
    """Configure ``backend`` for this process and build ``workload`` on it: the two contract
    calls in one, for tests, benchmarks and notebooks (the runner calls them apart, recording
    the runtime in between). ``options`` are the backend's framework settings by name
    (``rosetta.backends.options``: torch's ``compile``, paddle's ``static``...); ``build`` its
    build overrides (benchmarks)."""
    from rosetta.runtime import Runtime

    module = load(backend) if isinstance(backend, str) else backend
    request = Runtime.request(
        module.NAME,
        device=device,
        threads=threads,
        dtype=dtype,
        precision=precision,
        tf32=tf32,
        seed=seed,
        options=options,
    )
    return module.build(workload, params, module.configure(request), **build)


def runtime_for(backend: str | ModuleType, **request):
    """``configure(Runtime.request(NAME, **request))`` for ``backend``: the runtime in effect."""
    from rosetta.runtime import Runtime

    module = load(backend) if isinstance(backend, str) else backend
    return module.configure(Runtime.request(module.NAME, **request))
