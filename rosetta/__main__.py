"""``python -m rosetta``: the ``rosetta`` console script (``rosetta.cli.main``), as ``python -m
rosetta.cli`` is."""

import sys

from rosetta.cli import main

if __name__ == "__main__":
    sys.exit(main())
