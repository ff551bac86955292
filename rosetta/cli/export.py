"""``rosetta export``: a workload's evaluation graph as an interchange file.

``rosetta export cnn --onnx cnn.onnx`` writes the spec lowered to ONNX (``rosetta.export``): the
canonical weights of ``--seed`` as initializers, at ``--opset`` (default
:data:`rosetta.export.OPSET`), checked by ``onnx.checker`` and shape inference before anything is
written. The file is the user's path; it is written whole (a temporary file beside it, then
renamed), and the summary line names the opset and the node count.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from rosetta.errors import RosettaError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta export WORKLOAD --onnx FILE [--opset N] [--dtype D] [--seed S]``."""
    from rosetta.export import OPSET

    p = sub.add_parser(
        "export", help="write a workload's evaluation graph with its canonical weights as ONNX"
    )
    p.add_argument("workload", help="workload name (see `rosetta list`)")
    p.add_argument("--onnx", metavar="FILE", required=True, help="the .onnx file to write")
    p.add_argument("--opset", default=str(OPSET), help=f"ai.onnx opset (default {OPSET})")
    p.add_argument("--dtype", default="float32", help="float32 (default) or float64")
    p.add_argument("--seed", default="0", help="seed of the canonical weights (default 0)")
    p.set_defaults(func=run)


def _int(option: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RosettaError(f"{option}: expected an integer, got {text[:30]!r}") from None


def run(args: argparse.Namespace) -> int:
    """Export, check, write, and print one summary line."""
    from rosetta.backends import status
    from rosetta.spec import canonical_weights, get_workload

    st = status("onnxruntime")  # the extra that installs onnx
    try:
        import onnx  # noqa: F401 - the exporter's one dependency
    except ImportError:
        raise RosettaError(
            f"rosetta export needs the onnx package ({st.reason or 'not importable'}): "
            "pip install 'rosetta[onnx]'"
        ) from None
    from rosetta.export import graph

    workload = get_workload(args.workload)
    opset, seed = _int("--opset", args.opset), _int("--seed", args.seed)
    if seed < 0:
        raise RosettaError(f"--seed: must be >= 0, got {seed}")
    graph.check_opset(opset)
    model = graph.to_model(workload, canonical_weights(workload, seed), args.dtype, opset)
    path = Path(args.onnx)
    _write(path, model.SerializeToString())
    counts = ", ".join(f"{k} x{v}" for k, v in graph.node_counts(model).items())
    print(
        f"wrote {path}: workload {workload.name}, opset {opset}, {len(model.graph.node)} nodes "
        f"({counts}), {len(model.graph.initializer)} initializers, {args.dtype}, seed {seed}"
    )
    return 0


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a temporary file in the same folder, then a rename."""
    if path.is_dir():
        raise RosettaError(f"--onnx {path}: is a folder; name a file, e.g. {path / 'model.onnx'}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise RosettaError(f"--onnx {path}: the folder {folder} does not exist; create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)  # as a plain open() would make it, not mkstemp's 0600
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        from rosetta.runner.records import disk_error

        raise disk_error(path, exc) from None
