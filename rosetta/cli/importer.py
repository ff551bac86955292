"""``rosetta import``: bring your own model, an ONNX file read into the neutral spec.

``rosetta import MODEL.onnx [--name NAME] [--models-dir DIR]`` writes ``NAME.yaml`` and its
weights ``NAME.npz`` into the models folder (``--models-dir``, else ``$ROSETTA_MODELS``): the
file's nodes as spec layers, its initializers as the canonical weights, its provenance, and the
float64 reference checked against ONNX Runtime's run of the original file before anything is
written (``rosetta.importer``). ``rosetta import --check MODEL.onnx`` prints the coverage table
alone: one row per ONNX node type, the spec ops it became or why it cannot. Any unsupported
node: the table, one line naming the types and counts, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rosetta.errors import RosettaError

EXIT_UNSUPPORTED = 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta import MODEL.onnx [--check] [--name N] [--models-dir D] ...``."""
    p = sub.add_parser(
        "import",
        help="read an ONNX model into a workload every backend runs (bring your own model)",
        description="Read an ONNX file into the neutral spec: NAME.yaml and NAME.npz in the "
        "models folder, checked against ONNX Runtime's run of the file before anything is "
        "written. --check prints the coverage table only.",
    )
    p.add_argument("model", help="the .onnx file")
    p.add_argument("--check", action="store_true", help="print the coverage table; write nothing")
    p.add_argument("--name", help="the workload's name (default: the file's stem)")
    p.add_argument("--models-dir", help="where to write (default: $ROSETTA_MODELS)")
    p.add_argument("--task", choices=("features", "train"), default="features",
                   help="features (forward only, the default) or train (softmax cross-entropy "
                   "and SGD with momentum; a CIFAR-10-shaped classifier). A token-id model "
                   "always trains, on IMDB with Adam")  # fmt: skip
    p.add_argument("--input-shape", help="per-sample input shape for dynamic dims, e.g. 3,224,224")
    p.add_argument("--force", action="store_true", help="replace NAME.yaml/NAME.npz if present")
    p.set_defaults(func=run)


def _shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise RosettaError(
            f"--input-shape: expected positive integers like 3,224,224, got {text!r}"
        )
    return dims


def table(coverage: dict) -> str:
    """The coverage table as text: node type, count, what it became (or why not)."""
    rows = [("ONNX node", "count", "became")]
    for op, row in sorted(coverage.items()):
        became = f"unsupported: {row.reason}" if row.reason else ", ".join(sorted(row.became))
        rows.append((op, str(row.count), became or "-"))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{a:<{width[0]}}  {b:>{width[1]}}  {c}" for a, b, c in rows)


def run(args: argparse.Namespace) -> int:
    """Import (or only check) one file; prints the table and one summary line."""
    from rosetta.importer import run as importer

    path = Path(args.model)
    shape = _shape(args.input_shape)
    try:
        if args.check:
            _, result = importer.read_and_translate(path, shape)
            print(table(result.coverage))
            nodes = sum(r.count for r in result.coverage.values())
            print(f"{path}: every node type is read ({nodes} nodes)")
            return 0
        folder = args.models_dir or os.environ.get("ROSETTA_MODELS")
        if not folder:
            raise RosettaError(
                "rosetta import writes into your models folder: pass --models-dir DIR or set "
                "ROSETTA_MODELS=DIR (then rosetta bench and rosetta code find the workload there)"
            )
        name = args.name or importer.default_name(path)
        done = importer.import_model(path, Path(folder), name, args.task, shape, args.force)
    except importer.UnsupportedNodes as exc:
        print(table(exc.coverage))
        print(f"rosetta: error: {exc}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    print(table(done.coverage))
    print(
        f"wrote {done.spec_path} and {done.weights_path.name}: {done.params:,} parameters; the "
        f"reference matches ONNX Runtime on the file to {done.check.max_rel:.2g} of the largest "
        "output"
    )
    return 0
