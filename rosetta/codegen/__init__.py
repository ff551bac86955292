"""Generated source: each workload as the file a careful person would write in each framework.

``rosetta code WORKLOAD --backend NAME`` prints it; ``rosetta code --all DIR`` writes them all.

**Mechanism.** The source is generated from the same op table as the lowering, not kept by
hand beside it. Each op a backend lowers is one module of its folder, ``ops/<op>.py``, holding
the native ``build`` and, beside it, ``render(op, site, ctx) -> Snippet`` under the same
signature: the constructor line(s) with real names, the forward line(s) with shape comments, the
weights it owns and the layout conversion each needs (OIHW -> HWIO, the flatten row
permutation, GRU gate order). The backend's ``source.py`` finds them
(:func:`rosetta.backends.driver.discover`: ``OPS``) and ``lowering.TABLE`` /
``source.RENDER`` are the table's two faces, both a
:class:`~rosetta.backends.driver.LoweringTable`; the ONE driver,
:func:`rosetta.backends.driver.lower`, walks either, its ``on_op`` hook collecting each op's
snippet for the report's Rosetta page. The per-framework file around the model (imports, the
canonical ``.npz`` loader, the optimiser as the spec states it, written out where the
framework's stock one differs, the training or features step, ``--check``) lives in the
backend's folder, ``rosetta/backends/<name>/codegen.py`` (text shared by every file:
``rosetta.backends.filetext``). Layering: spec < backends (driver, snippet values, op modules,
``source.py``, the templates) < codegen (this file) < runner, report, cli; the gate's check of a
generated file lives with the tests (``tests/conformance/generated_run.py``).

Why this and not another: rendering beside lowering keeps one place per op per framework to
read and edit (``rosetta/backends/<name>/ops/conv2d.py`` holds both faces of ``conv2d``);
both faces come from that one table, so they cannot drift in coverage; and the generated files
are gated against the float64 reference exactly like the lowered models
(``tests/conformance/test_generated_source.py``), which is what proves that both say the same
thing. Rendering is text only and imports no framework, so ``rosetta code`` works on a
NumPy-only install.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from rosetta import backends
from rosetta.backends import filetext as common
from rosetta.backends.driver import LoweringTable, OpTable, Site, lower
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, attr
from rosetta.errors import BackendError, RosettaError
from rosetta.spec import get_workload
from rosetta.spec.ops import Shape
from rosetta.spec.workload import Workload

__all__ = [
    "BACKENDS",
    "Generated",
    "OpSource",
    "RenderCtx",
    "Rendered",
    "Snippet",
    "Weight",
    "file_name",
    "generate",
    "imports",
    "op_table",
    "render_table",
    "rendered",
    "write_all",
]


def _writes_source(name: str) -> bool:
    """Whether backend ``name``'s folder holds a file template (``codegen.py``): found by
    convention, without importing the backend (or its framework)."""
    try:
        return importlib.util.find_spec(f"{backends.info(name).module_name}.codegen") is not None
    except (ImportError, BackendError):
        return False


#: backends that render source, in the registry's order (the reference first): those whose
#: folder holds a ``codegen.py`` (the serving engines run the exported graph: no file of theirs)
BACKENDS = tuple(name for name in backends.names() if _writes_source(name))


@dataclass(frozen=True)
class OpSource:
    """One op of the graph and its rendering: the rows of the Rosetta page."""

    path: str  # e.g. "3" or "4.body.2"
    op: object
    site: Site
    snippet: Snippet


@dataclass(frozen=True)
class Rendered:
    """A graph rendered by one table: the composed snippet and each op's own."""

    model: Snippet
    ops: tuple[OpSource, ...]
    out_shape: Shape
    helpers: str  # the source of the helper functions the model's lines call, in order


@dataclass(frozen=True)
class Generated:
    """One generated file: where it goes and what it says."""

    workload: str
    backend: str
    name: str  # file name, e.g. "cnn_torch.py"
    text: str

    @property
    def lines(self) -> int:
        """Its line count."""
        return self.text.count("\n")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise BackendError(
            f"unknown backend {backend!r} for source generation; valid backends: "
            f"{', '.join(BACKENDS)}"
        )


def op_table(backend: str) -> OpTable:
    """``backend``'s one op table (``source.OPS``), loaded as :func:`render_table` says."""
    _check_backend(backend)
    return backends.source_module(backend).OPS


def render_table(backend: str) -> LoweringTable[Snippet]:
    """The ``RENDER`` table of ``backend`` (the source face of its ``OPS``), from its
    ``source.py`` alone (``rosetta.backends.source_module``: text, so generating source can never
    import a framework, whatever a backend's package does on import)."""
    _check_backend(backend)
    return backends.source_module(backend).RENDER


def _template(backend: str) -> ModuleType:
    """The backend's file template, ``rosetta/backends/<name>/codegen.py`` (text only)."""
    return importlib.import_module(f"{backends.info(backend).module_name}.codegen")


def imports(backend: str) -> tuple[str, ...]:
    """The modules ``backend``'s generated file imports beyond the standard library (its
    template's ``MODULES``): what must be installed to run it."""
    _check_backend(backend)
    return tuple(_template(backend).MODULES)


def _workload(workload: str | Workload) -> Workload:
    return get_workload(workload) if isinstance(workload, str) else workload


def rendered(workload: str | Workload, backend: str) -> Rendered:
    """``workload``'s graph rendered by ``backend``'s table (the model and each op's snippet),
    walked by the one driver."""
    w = _workload(workload)
    rows: list[OpSource] = []
    model = lower(
        render_table(backend),
        w.graph,
        w.input.shape,
        RenderCtx(backend=backend),
        on_op=lambda path, op, site, snippet: rows.append(OpSource(path, op, site, snippet)),
    )
    known = {**common.HELPERS, **op_table(backend).helpers}
    return Rendered(model, tuple(rows), w.output_shape, common.helpers_source(model.helpers, known))


def file_name(workload: str | Workload, backend: str) -> str:
    """``<workload>_<backend>.py`` (the name as an identifier: never a path of its own)."""
    return f"{attr(_workload(workload).name)}_{backend}.py"


def generate(workload: str | Workload, backend: str) -> Generated:
    """The self-contained source file of ``workload`` in ``backend``'s framework."""
    _check_backend(backend)
    w = _workload(workload)
    text = _template(backend).source(w, rendered(w, backend))
    return Generated(w.name, backend, file_name(w, backend), text)


def write_all(folder: str | Path, workloads: list[str] | None = None) -> list[Path]:
    """Write every workload x backend file into ``folder`` (created); returns the paths. A
    backend whose op table lacks an op of a workload (``rosetta.backends.missing_ops``) has no
    file of it: :func:`unwritten` names those pairs.

    Nothing is written through a link: a target in ``folder`` that is a symbolic link (or
    anything but a regular file) is refused, before any file is written, with one line naming
    it, and each file is opened with ``O_NOFOLLOW`` so a link made meanwhile is refused too."""
    from rosetta.spec import workload_names

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = [
        generate(name, b)
        for name in workloads or workload_names()
        for b in BACKENDS
        if not backends.missing_ops(b, get_workload(name))
    ]
    for g in files:
        _check_target(out / g.name)
    paths = []
    for g in files:
        path = out / g.name
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _link_error(path) from None
            raise
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(g.text)
        paths.append(path)
    return paths


def unwritten(workloads: list[str] | None = None) -> list[str]:
    """Why each workload x backend pair :func:`write_all` leaves out has no file (one line each:
    the ops the backend does not lower yet)."""
    from rosetta.spec import workload_names

    return [
        why
        for name in workloads or workload_names()
        for b in BACKENDS
        if (why := backends.lowering_unsupported(b, get_workload(name)))
    ]


def _link_error(path: Path) -> RosettaError:
    return RosettaError(
        f"{path} is a symbolic link; rosetta code --all writes no file through a link "
        "(remove it, or write into another folder)"
    )


def _check_target(path: Path) -> None:
    """Refuse a target that is a link or not a regular file (one line naming it)."""
    if path.is_symlink():
        raise _link_error(path)
    if path.exists() and not path.is_file():
        raise RosettaError(
            f"{path} exists and is not a regular file; rosetta code --all writes only files "
            "(remove it, or write into another folder)"
        )
