"""``rosetta env``: the environment manifest every record carries, printed as JSON."""

from __future__ import annotations

import argparse
import json

from rosetta import backends
from rosetta.runner import manifest


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta env``."""
    p = sub.add_parser("env", help="print the environment manifest (machine, threads, versions)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print machine facts and, per backend, its framework versions or why it cannot run."""
    env = manifest.environment()
    env["backends"] = {
        name: dict(st.versions) if st.usable else {"unavailable": st.reason, **dict(st.versions)}
        for name in backends.names()
        for st in [backends.status(name)]
    }
    print(json.dumps(env, indent=2))
    return 0
