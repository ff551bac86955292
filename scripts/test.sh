#!/usr/bin/env bash
# The test command: set up .venv if needed, then run the default (quick) test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m slow` for the long tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all,dev
bash scripts/install_chromium.sh  # the report's browser test; skips quietly once installed
exec .venv/bin/python -m pytest "$@"
