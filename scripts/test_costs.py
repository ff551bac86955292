#!/usr/bin/env python
"""What each backend costs the test tiers: the per-test times of a tier's run (the JUnit XML that
``scripts/test.sh`` writes to ``.test-times/<tier>.xml``) summed per backend and per test file.

    python scripts/test_costs.py [.test-times/quick.xml]

A test is a backend's when one of its parameters is the backend's name (``[jax-cnn-float32]``,
``[keras_torch]``) or its file is ``tests/test_backend_<name>.py``; the rest is the harness's
(bench runs, faults, the report...). Times are worker-seconds: on two workers the tier takes
about half their sum.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def costs(path: Path) -> tuple[Counter, Counter, float]:
    """Seconds per backend and per file, and the total, from one JUnit XML."""
    from rosetta import backends

    names = sorted(backends.names(), key=len, reverse=True)  # keras_torch before torch
    per_backend: Counter = Counter()
    per_file: Counter = Counter()
    total = 0.0
    for case in ET.parse(path).getroot().iter("testcase"):
        t = float(case.get("time") or 0.0)
        total += t
        cls, name = case.get("classname", ""), case.get("name", "")
        file = cls.replace(".", "/") + ".py"
        per_file[file] += t
        ids = name.split("[", 1)[1].rstrip("]") if "[" in name else ""
        tokens = set(re.split(r"[-\[\]]", ids))
        owner = next((b for b in names if b in tokens or file.endswith(f"test_backend_{b}.py")), "")
        per_backend[owner or "(harness)"] += t
    return per_backend, per_file, total


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else REPO / ".test-times" / "quick.xml"
    if not path.is_file():
        print(f"no {path}: run bash scripts/test.sh first (it writes it)", file=sys.stderr)
        return 2
    per_backend, per_file, total = costs(path)
    print(f"{path}: {total:.0f} worker-seconds in all")
    print("per backend (worker-seconds):")
    for name, t in per_backend.most_common():
        print(f"  {t:7.1f}  {name}")
    print("slowest files:")
    for name, t in per_file.most_common(15):
        print(f"  {t:7.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
