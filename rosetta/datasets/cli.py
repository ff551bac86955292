"""``rosetta data fetch | synth | info``: the data sub-commands of the ``rosetta`` CLI.

``rosetta.cli`` calls :func:`add_parser`; each sub-command's ``func(args) -> int`` raises
:class:`rosetta.errors.DataError` for bad input, which the main CLI prints as one line.
"""

from __future__ import annotations

import argparse
import time

from rosetta.datasets import cifar10, download, info, paths
from rosetta.datasets.checksums import file_digest
from rosetta.datasets.synth_cifar10 import write_synthetic_cifar10
from rosetta.datasets.synth_imdb import write_synthetic_imdb

DATASETS = ("cifar10", "imdb", "all")


def _selected(name: str) -> tuple[str, ...]:
    return ("cifar10", "imdb") if name == "all" else (name,)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        default=None,
        help=f"data directory (default: ${paths.ENV_VAR}, else <repo root>/data)",
    )


def cmd_synth(args: argparse.Namespace) -> int:
    """Write synthetic datasets in the official formats."""
    data_dir = paths.ensure_writable_dir(paths.resolve_data_dir(args.data_dir))
    jobs = {
        "cifar10": (
            cifar10.archive_path(data_dir),
            "md5",
            lambda: write_synthetic_cifar10(
                data_dir, seed=args.seed, n_train=args.cifar_train, n_test=args.cifar_test
            ),
        ),
        "imdb": (
            data_dir / download.IMDB_ARCHIVE.filename,
            "sha256",
            lambda: write_synthetic_imdb(
                data_dir, seed=args.seed, n_train=args.imdb_train, n_test=args.imdb_test
            ),
        ),
    }
    for name in _selected(args.dataset):
        target, algo, write = jobs[name]
        if target.exists() and not args.force:
            print(f"{name}: {target} exists, left unchanged (use --force to overwrite)")
            continue
        t0 = time.perf_counter()
        path = write()
        dt = time.perf_counter() - t0
        size = path.stat().st_size / 1e6
        print(
            f"{name}: wrote synthetic {path} ({size:.1f} MB, seed {args.seed}, "
            f"{algo} {file_digest(path, algo)}) in {dt:.1f} s"
        )
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """Download the official files (verified, atomic); optionally extract CIFAR-10."""
    data_dir = paths.resolve_data_dir(args.data_dir)
    for name in _selected(args.dataset):
        path = download.fetch_dataset(name, data_dir, force=args.force)
        print(f"{name}: {path} verified")
        if args.extract and name == "cifar10":
            folder = cifar10.extract_cifar10(data_dir)
            print(f"{name}: extracted to {folder}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """Print what is present; exit status 1 if any present file fails verification."""
    text, ok = info.format_report(args.data_dir)
    print(text)
    return 0 if ok else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``data`` with sub-commands ``fetch``, ``synth`` and ``info`` to ``sub``."""
    data = sub.add_parser("data", help="fetch, synthesise or inspect datasets")
    dsub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    dsub.required = True

    p = dsub.add_parser("synth", help="write synthetic CIFAR-10 / IMDB in the official formats")
    _common(p)
    p.add_argument("--dataset", choices=DATASETS, default="all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cifar-train", type=int, default=50000, metavar="N")
    p.add_argument("--cifar-test", type=int, default=10000, metavar="N")
    p.add_argument("--imdb-train", type=int, default=25000, metavar="N")
    p.add_argument("--imdb-test", type=int, default=25000, metavar="N")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(func=cmd_synth)

    p = dsub.add_parser("fetch", help="download the official files (checksums verified)")
    _common(p)
    p.add_argument("--dataset", choices=DATASETS, default="all")
    p.add_argument("--force", action="store_true", help="replace a synthetic file")
    p.add_argument(
        "--extract", action="store_true", help="also extract cifar-10-batches-py/ (safely)"
    )
    p.set_defaults(func=cmd_fetch)

    p = dsub.add_parser("info", help="show which datasets are present, real or synthetic")
    _common(p)
    p.set_defaults(func=cmd_info)
