#!/usr/bin/env bash
# The main job: set up .venv if needed, then show what the benchmark can run and on which data.
# (The timed matrix of backends x workloads joins here as the framework backends land.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all,dev
rosetta=.venv/bin/rosetta
"$rosetta" list --details
if ! "$rosetta" data info >/dev/null 2>&1; then
    "$rosetta" data synth
fi
"$rosetta" data info
