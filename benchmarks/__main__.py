"""``python -m benchmarks NAME [args]``: run one benchmark module (``benchmarks/NAME.py``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(here)])
        if not m.name.startswith("_") and m.name not in ("common", "handwritten")
    )
    if not argv or argv[0] not in names:
        print(f"usage: python -m benchmarks NAME [args]; NAME one of: {', '.join(names)}")
        return 2
    return int(importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
