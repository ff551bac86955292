#!/usr/bin/env bash
# The main job: set up .venv if needed, list what can run, run the benchmark matrix (profile
# smoke by default: every backend x workload, the training run + 5 timing rounds; its start line
# gives the plan's estimate, `rosetta bench --dry-run` the plan alone; measured: 40 min 18 s for
# 11 backends x 4 workloads on a 2-core Zen 5, shared/runs/zen5-smoke-20261127), and end with the
# summary table and the path of the HTML report. Arguments go to `rosetta bench`, e.g.
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
