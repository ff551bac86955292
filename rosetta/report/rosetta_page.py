"""The report's "Rosetta" page: each spec op beside the line(s) every framework says it with.

One table per workload, one row per op of the spec (its YAML line), one column per framework
(the source lines ``rosetta code`` generates for that op, from the backend's ``source.py``), with
the layout conversions (OIHW -> HWIO, the flatten row permutation, GRU gate order) called out in
the cell where they happen. ResNet-50's bottlenecks repeat one pattern: the page shows the stem,
the first block of each stage and the head, and says how many blocks it left out. Like the main
report the page is one self-contained HTML file: ``default-src 'none'``, no script.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

from rosetta import backends, codegen
from rosetta.backends.filetext import spec_line
from rosetta.spec import get_workload, workload_names
from rosetta.spec.graph import walk

TEMPLATE = "rosetta_page.html.j2"
PAGE = "rosetta.html"


def frameworks() -> dict[str, str]:
    """backend -> its column's name, in the registry's order: the backends that write source
    and name a ``PAGE_NAME`` (the Keras engines share the Keras column)."""
    return {b: page for b in codegen.BACKENDS if (page := backends.constant(b, "PAGE_NAME"))}


_REPEAT = re.compile(r"^(layer\d+)\.(\d+)\.")  # a repeated block's op names: layer2.3.conv1


@dataclass(frozen=True)
class Said:
    """How one framework says one op: its source lines and the conversions at this op."""

    lines: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Row:
    """One op of the spec and each framework's lines for it."""

    path: str
    spec: str
    said: tuple[Said, ...]  # in frameworks() order


@dataclass(frozen=True)
class Table:
    """One workload's rows."""

    workload: str
    description: str
    frameworks: tuple[str, ...]  # its columns: the page's frameworks that lower the workload
    rows: tuple[Row, ...]
    omitted: int  # ops of repeated blocks left out


def _shown(op: object) -> bool:
    m = _REPEAT.match(getattr(op, "name", "") or "")
    return m is None or m.group(2) == "0"


def _shown_groups(sources) -> dict[str, bool]:
    """Top-level graph index -> shown. A group (an op, or a residual block's ops) is shown
    unless its ops are named after a repeated block (``layerN.K`` with K > 0); an unnamed op
    between blocks (the ReLU after a block) goes with the block before it."""
    groups: dict[str, list[object]] = {}
    for s in sources:
        groups.setdefault(s.path.split(".")[0], []).append(s.op)
    shown, prev = {}, True
    for top, group in groups.items():
        named = [op for op in group if getattr(op, "name", None)]
        prev = shown[top] = all(_shown(op) for op in named) if named else prev
    return shown


def workload_table(name: str) -> Table:
    """The rows of workload ``name``: the rendering of every framework that lowers it, op by op
    (a framework with a declared gap, ``UNSUPPORTED``, has no column for that workload only)."""
    w = get_workload(name)
    columns = {b: page for b, page in frameworks().items() if lowers(b, name)}
    per_backend = [codegen.rendered(w, b).ops for b in columns]
    shown = _shown_groups(per_backend[0])
    rows, omitted = [], 0
    for sources in zip(*per_backend, strict=True):
        first = sources[0]
        if not shown[first.path.split(".")[0]]:
            omitted += 1
            continue
        said = tuple(Said(tuple(s.snippet.lines()), s.snippet.notes) for s in sources)
        rows.append(Row(first.path, spec_line(first.op), said))
    return Table(w.name, w.description, tuple(columns.values()), tuple(rows), omitted)


def lowers(backend: str, name: str) -> bool:
    """Whether ``backend``'s table has an entry for every op of workload ``name``."""
    w = get_workload(name)
    ops_used = {type(op) for op, _, _ in walk(w.graph, w.input.shape)}
    return ops_used <= set(codegen.op_table(backend).entries)


def context() -> dict:
    """Everything the page shows."""
    return {
        "tables": [workload_table(n) for n in workload_names() if lowers("numpy_ref", n)],
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def render() -> str:
    """The page's HTML text."""
    from rosetta.report.html import environment

    return environment().get_template(TEMPLATE).render(**context())


def write_rosetta_page(out_dir: Path) -> Path:
    """Write ``out_dir/rosetta.html`` (creating the folder) and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PAGE
    tmp = path.with_name(f".{PAGE}.partial")
    tmp.write_text(render(), encoding="utf-8")
    tmp.replace(path)
    return path
