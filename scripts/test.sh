#!/usr/bin/env bash
# The test command: set up .venv if needed, then run the quick test tier on every core.
#
#   bash scripts/test.sh              # the quick tier (what a contributor runs between edits)
#   bash scripts/test.sh -m slow      # the slow tier (CI runs it after the quick one: .ci/run)
#   bash scripts/test.sh -n 0 -k gru  # serially, a selection; other arguments go to pytest
#
# The tests run on pytest-xdist workers, one per usable core (ROSETTA_TEST_WORKERS overrides),
# each pinned to its own core with every cell it starts (tests/conftest.py);
# `--dist loadgroup` keeps every conformance check of one backend on one worker, so each model is
# built once (tests/conformance/conftest.py). `--durations=30` lists the slowest tests last.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all,dev
bash scripts/install_chromium.sh  # the report's browser test; skips quietly once installed
workers="${ROSETTA_TEST_WORKERS:-auto}"
pytest=(.venv/bin/python -m pytest -n "$workers" --dist loadgroup --durations=30)
# every test's time, for scripts/test_costs.py (what each backend costs a tier)
mkdir -p .test-times
if [ $# -eq 0 ]; then
    # each worker owns its share of the cores (tests/conftest.py); the few tests that need
    # every core (marked whole_machine) run after the others, alone
    "${pytest[@]}" -m "not slow and not whole_machine" --junitxml .test-times/quick.xml
    exec .venv/bin/python -m pytest -n 0 -m "not slow and whole_machine"
fi
if [ "$*" = "-m slow" ]; then
    exec "${pytest[@]}" "$@" --junitxml .test-times/slow.xml
fi
exec "${pytest[@]}" "$@"
