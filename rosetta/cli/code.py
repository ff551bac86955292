"""``rosetta code``: a workload as the self-contained source file of one framework.

``rosetta code cnn --backend torch`` prints ``cnn_torch.py`` (NumPy and PyTorch only, no
Rosetta import); ``rosetta code --all DIR`` writes every workload x framework into ``DIR``.
Generation is text only (``rosetta.codegen``): it works with only NumPy installed.
"""

from __future__ import annotations

import argparse
import sys

from rosetta.errors import RosettaError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta code [WORKLOAD] [--backend NAME] [--all DIR]``."""
    p = sub.add_parser(
        "code", help="print a workload as idiomatic source of one framework (or write them all)"
    )
    p.add_argument("workload", nargs="?", help="workload name (see `rosetta list`)")
    from rosetta.codegen import BACKENDS

    p.add_argument("--backend", help=f"one of {', '.join(BACKENDS)}")
    p.add_argument(
        "--all",
        metavar="DIR",
        dest="all_dir",
        help="write every workload x framework (or every framework of WORKLOAD) into DIR",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print one file, or write them all and list what was written."""
    from rosetta import codegen
    from rosetta.spec import get_workload

    if args.all_dir:
        names = [get_workload(args.workload).name] if args.workload else None
        if args.backend:
            raise RosettaError("--all writes every framework; drop --backend (or drop --all)")
        for path in codegen.write_all(args.all_dir, names):
            lines = path.read_text().count("\n")
            print(f"{path}  ({lines} lines)")
        for why in codegen.unwritten(names):
            print(f"no file: {why}")
        return 0
    if not args.workload or not args.backend:
        raise RosettaError(
            "rosetta code needs WORKLOAD and --backend NAME (e.g. `rosetta code cnn --backend "
            f"torch`), or --all DIR; backends: {', '.join(codegen.BACKENDS)}"
        )
    sys.stdout.write(codegen.generate(args.workload, args.backend).text)
    return 0
