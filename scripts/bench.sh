#!/usr/bin/env bash
# The main job: set up .venv if needed, list what can run, then run the benchmark matrix.
# Arguments go to `rosetta bench` (default: every backend x workload, profile ci), e.g.
#   bash scripts/bench.sh --profile smoke --backends numpy_ref
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all,dev
.venv/bin/rosetta list --details
exec .venv/bin/rosetta bench "$@"
