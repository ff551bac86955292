"""``python -m rosetta.cli``: the same as the ``rosetta`` console script."""

import sys

from rosetta.cli import main

sys.exit(main())
