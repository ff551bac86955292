"""``rosetta export``: a workload's evaluation graph as an interchange file.

``rosetta export cnn --onnx cnn.onnx`` writes the spec lowered to ONNX (``rosetta.export``): the
canonical weights of ``--seed`` as initializers, at ``--opset`` (default
:data:`rosetta.export.OPSET`), checked by ``onnx.checker`` and shape inference before anything is
written. The file is the user's path, written by ``rosetta.userfile``'s rule: an absent path,
or a regular file with ``--force``; a device, FIFO, socket, folder or symlink is refused in one
line. It is written whole (a temporary file beside it, then renamed), and the summary line names
the opset and the node count. OpenVINO's default compile on a CPU with bf16 units (AVX-512 BF16,
AMX) runs float32 models in bf16 (measured 3.4e-3 to 4.5e-3 off the float32 reference); Rosetta's
``openvino`` backend compiles with ``INFERENCE_PRECISION_HINT`` f32, and a user running the file
elsewhere should set the same.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rosetta.errors import RosettaError
from rosetta.userfile import check_target, write_user_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta export WORKLOAD --onnx FILE [--opset N] [--dtype D] [--seed S]``."""
    from rosetta.export import OPSET

    p = sub.add_parser(
        "export",
        help="write a workload's evaluation graph with its canonical weights as ONNX",
        description="Write a workload's evaluation graph as ONNX. Note: OpenVINO's default "
        "compile on a CPU with bf16 units runs float32 models in bf16 (measured 3.4e-3 to 4.5e-3 "
        "off the float32 reference); Rosetta's openvino backend sets INFERENCE_PRECISION_HINT "
        "f32, and so should a user who wants float32.",
    )
    p.add_argument("workload", help="workload name (see `rosetta list`)")
    p.add_argument("--onnx", metavar="FILE", required=True, help="the .onnx file to write")
    p.add_argument("--opset", default=str(OPSET), help=f"ai.onnx opset (default {OPSET})")
    p.add_argument("--dtype", default="float32", help="float32 (default) or float64")
    p.add_argument("--seed", default="0", help="seed of the canonical weights (default 0)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it is a regular file")
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
    path = Path(args.onnx)
    check_target(path, "--onnx", args.force)  # before the export's work, and again at the write
    model = graph.to_model(workload, canonical_weights(workload, seed), args.dtype, opset)
    write_user_file(path, model.SerializeToString(), "--onnx", args.force)
    counts = ", ".join(f"{k} x{v}" for k, v in graph.node_counts(model).items())
    print(
        f"wrote {path}: workload {workload.name}, opset {opset}, {len(model.graph.node)} nodes "
        f"({counts}), {len(model.graph.initializer)} initializers, {args.dtype}, seed {seed}"
    )
    return 0
