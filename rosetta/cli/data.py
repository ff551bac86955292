"""``rosetta data fetch | synth | info | accept``: the data sub-commands of the ``rosetta`` CLI.

``rosetta.cli`` calls :func:`add_parser`; each sub-command's ``func(args) -> int`` raises
:class:`rosetta.errors.DataError` for bad input, which the main CLI prints as one line. The
data sets and their options come from :mod:`rosetta.datasets.registry`.
"""

from __future__ import annotations

import argparse
import time

from rosetta.datasets import download, info, paths, registry
from rosetta.datasets.accept import accept
from rosetta.datasets.checksums import file_digest
from rosetta.errors import DataError

SEED_MAX = 2**63 - 1  # NumPy's generators take any non-negative integer; one bound, stated


def _seed(text: str) -> int:
    """``--seed``: a whole number from 0 to ``SEED_MAX`` (NumPy's generators refuse negatives)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{value} is not a seed: use 0 to {SEED_MAX}")
    return value


def _choices() -> tuple[str, ...]:
    return (*registry.file_datasets(), "all")


def _selected(name: str) -> list[str]:
    return registry.file_datasets() if name == "all" else [name]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        default=None,
        help=f"data directory (default: ${paths.ENV_VAR}, else <repo root>/data)",
    )


def cmd_synth(args: argparse.Namespace) -> int:
    """Write synthetic datasets in the official formats."""
    data_dir = paths.ensure_writable_dir(paths.resolve_data_dir(args.data_dir))
    for tmp in paths.remove_stale_temps(data_dir):
        print(f"removed a stale temporary file of an interrupted write: {tmp}")
    for name in _selected(args.dataset):
        entry = registry.get(name)
        assert entry.synthesize is not None and entry.remote is not None
        target = entry.default_path(data_dir)
        if target.exists() and not args.force:
            print(f"{name}: {target} exists, left unchanged (use --force to overwrite)")
            continue
        n_train = getattr(args, f"{entry.cli_prefix}_train")
        n_test = getattr(args, f"{entry.cli_prefix}_test")
        t0 = time.perf_counter()
        path = entry.synthesize(data_dir, seed=args.seed, n_train=n_train, n_test=n_test)
        dt = time.perf_counter() - t0
        size = path.stat().st_size / 1e6
        algo = entry.remote.algorithm
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
        extract = registry.get(name).extract
        if args.extract and extract is not None:
            folder = extract(data_dir)
            print(f"{name}: extracted to {folder}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """Print what is present; exit status 1 if any present file fails verification."""
    data_dir = paths.resolve_data_dir(args.data_dir)
    if data_dir.exists() and not data_dir.is_dir():
        raise DataError(
            f"--data-dir {data_dir} is not a folder (it is a file); name the folder that holds the "
            f"data sets (or leave --data-dir out for the default)"
        )
    text, ok = info.format_report(args.data_dir)
    print(text)
    return 0 if ok else 1


def cmd_accept(args: argparse.Namespace) -> int:
    """Check a user's own copy by its contents and record it as ``user-provided``."""
    dataset = None if args.dataset == "auto" else args.dataset
    done = accept(args.path, args.data_dir, dataset=dataset, force=args.force)
    print(f"{done.dataset}: {done.path} accepted as {done.source} ({done.digest})")
    for fact in done.facts:
        print(f"  checked: {fact}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``data`` with sub-commands ``fetch``, ``synth``, ``info`` and ``accept`` to ``sub``."""
    data = sub.add_parser("data", help="fetch, synthesise, accept or inspect datasets")
    dsub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    dsub.required = True

    p = dsub.add_parser("synth", help="write synthetic datasets in the official formats")
    _common(p)
    p.add_argument("--dataset", choices=_choices(), default="all")
    p.add_argument(
        "--seed", type=_seed, default=0, help=f"generator seed, 0 to {SEED_MAX} (default 0)"
    )
    for name in registry.file_datasets():
        entry = registry.get(name)
        for split, n in entry.official_sizes.items():
            p.add_argument(
                f"--{entry.cli_prefix}-{split}",
                type=int,
                default=n,
                metavar="N",
                help=f"{entry.title} {split} samples (default {n}, the official count)",
            )
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(func=cmd_synth)

    p = dsub.add_parser("fetch", help="download the official files (checksums verified)")
    _common(p)
    p.add_argument("--dataset", choices=_choices(), default="all")
    p.add_argument("--force", action="store_true", help="replace a synthetic or accepted file")
    p.add_argument(
        "--extract", action="store_true", help="also extract cifar-10-batches-py/ (safely)"
    )
    p.set_defaults(func=cmd_fetch)

    p = dsub.add_parser(
        "info", help="show which datasets are present: official, user-provided or synthetic"
    )
    _common(p)
    p.set_defaults(func=cmd_info)

    p = dsub.add_parser(
        "accept",
        help="check your own copy of a data set by its contents and use it as user-provided",
        description=(
            "For a copy of CIFAR-10 or IMDB whose bytes differ from the official checksum "
            "(re-packed, from a mirror): check its format and contents (shapes, label ranges, "
            "counts, class balance), copy it into the data directory under the official name, "
            "and record it with its own checksum as source 'user-provided'."
        ),
    )
    p.add_argument(
        "path",
        help="the file (cifar-10-python.tar.gz, imdb.npz) or the folder "
        "cifar-10-batches-py/ to accept",
    )
    _common(p)
    p.add_argument(
        "--dataset",
        choices=(*registry.file_datasets(), "auto"),
        default="auto",
        help="which data set PATH holds (default: from its name)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace a different file already in the data dir"
    )
    p.set_defaults(func=cmd_accept)
