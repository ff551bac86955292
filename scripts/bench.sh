#!/usr/bin/env bash
# The main job: set up .venv if needed, list what can run, run the benchmark matrix (profile
# smoke by default: every backend x workload, 2 rounds, 10-21 min on a 2-core CPU), and end with the summary
# table and the path of the HTML report. Arguments go to `rosetta bench`, e.g.
#   bash scripts/bench.sh --profile ci --backends numpy_ref,torch
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all,dev
.venv/bin/rosetta list --details
status=0
.venv/bin/rosetta bench "$@" || status=$?
latest=$(ls -td report/*/ 2>/dev/null | head -1 || true)
[ -n "$latest" ] && echo "report: ${latest}index.html"
exit $status
