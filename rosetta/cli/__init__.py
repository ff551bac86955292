"""The ``rosetta`` command: ``list``, ``data``, ``bench``, ``env``, ``report``, ``code``,
``export``, ``import``, ``serve``: a module each.

Every user-facing failure is a :class:`rosetta.errors.RosettaError`; ``main`` prints its
message as one line on stderr and exits with status 2, so no traceback reaches the user
for bad input. Output piped into a reader that stops early (``rosetta list | head``) ends
quietly, as other command-line tools do.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rosetta.errors import RosettaError


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and a hint, not the usage block."""

    def error(self, message: str):  # type: ignore[override]
        """Print ``rosetta: error: <message>`` and where the help is; exit with status 2."""
        self.exit(2, f"rosetta: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with one sub-parser per command."""
    parser = OneLineParser(
        prog="rosetta",
        description="Cross-framework deep-learning benchmark: one spec, many frameworks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    from rosetta.cli import bench, code, data, env, export, importer, report, serve
    from rosetta.cli import list as list_cmd

    list_cmd.add_parser(sub)
    data.add_parser(sub)
    bench.add_parser(sub)
    env.add_parser(sub)
    report.add_parser(sub)  # pandas, matplotlib, Jinja2 load only when a report is made
    code.add_parser(sub)  # text only: generating source imports no framework
    export.add_parser(sub)  # onnx loads only when a graph is exported
    importer.add_parser(sub)  # `rosetta import`: onnx loads only when a file is read
    serve.add_parser(sub)  # `rosetta serve`: LoadGen loads only in a serving cell
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that left shows up here, not at interpreter exit
        return status
    except RosettaError as exc:
        from rosetta.safetext import plain

        print(f"rosetta: error: {plain(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rosetta: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
    except OSError as exc:  # a disk that refused a write where no caller named it more exactly
        from pathlib import Path

        from rosetta.runner.records import disk_error

        print(f"rosetta: error: {disk_error(Path(exc.filename or '?'), exc)}", file=sys.stderr)
        return 2


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
