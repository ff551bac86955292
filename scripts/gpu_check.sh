#!/usr/bin/env bash
# The GPU check: Rosetta's CUDA paths run for real, in minutes, on an NVIDIA machine.
#
#   bash scripts/gpu_check.sh             # on a machine with an NVIDIA GPU (about 8 minutes)
#   bash scripts/gpu_check.sh --dry-run   # anywhere: every command line below parses and plans
#
# It runs Rosetta from this source tree on the machine's own Python ($PYTHON, else python3;
# PYTHONPATH, no install), each cell a plain process (--executor python: no papermill), and needs
# numpy, pyyaml, threadpoolctl, torch, jax (with its CUDA plugin), flax, optax, and pandas,
# matplotlib and jinja2 for the report. In order, each bench a run of its own:
#   1. the synthetic data sets, in the official formats, in a folder of the check's own;
#   2. gpu-fp32: torch and jax at --device cuda on cnn, gru, resnet50 and the transformer, the ci
#      profile, fp32 with TF32 off (fp32 means fp32), the training run + 2 timing rounds;
#   3. gpu-bf16: the same cells at bf16, the training run;
#   4. gpu-tf32: the matmul-heavy cells (resnet50, transformer) at fp32 with --tf32;
#   5. cpu-ref: numpy_ref on the CPU, every workload (the gate's reference, timed as a backend);
#   6. gpu-import, only where GPU_CHECK_MODELS names a folder of imported workloads (`rosetta
#      import`, e.g. the test corpus: wired graphs, BatchNorm folded, concat): each of them at
#      --device cuda, fp32, the training run;
#   7. a table of what ran, read back from the records (device, gate verdict, step time,
#      autotune, layout, TF32 in effect), and the reports: bf16 against fp32, TF32 on against off.
# Everything lands in $OUT when it is set, else gpu-report/: gpu-check.log, nvidia-smi.txt,
# check.txt (the table), report.html, tf32-report.html, cpu-ref-report.html, records.tar.gz.
# Knobs (environment): GPU_CHECK_BUDGET_S (default 480) bounds the benches, each given a share
# by weight (gpu-fp32 5, gpu-bf16 2, gpu-tf32 2, cpu-ref 1), and one still running at the end of
# its share is interrupted (its records so far kept), so the reports are always written;
# GPU_CHECK_BENCHES (a comma list of those names) selects; GPU_CHECK_BACKENDS (torch,jax),
# GPU_CHECK_TF32_BACKENDS (the same), GPU_CHECK_WORKLOADS (the four built-in ones, for gpu-fp32
# and gpu-bf16) and GPU_CHECK_REPEAT (3) narrow; GPU_CHECK_MODELS (a folder) adds gpu-import
# (weight 2) over every *.yaml in it. Measured on an H200
# (docs/gpu/): a jax transformer cell compiles for 90 s, a torch resnet50 cell 50 s (inductor).
# Exit status: 0 when every cell that ran is ok and equivalent on the device it asked for;
# 1 when a cell failed its gate, failed, or ran elsewhere; 2 when a bench was refused or cut.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dry=0
case "${1:-}" in
    --dry-run) dry=1 ;;
    "") ;;
    *) echo "gpu_check: unknown argument ${1:0:40}; usage: bash scripts/gpu_check.sh [--dry-run]" >&2
       exit 2 ;;
esac
py="${PYTHON:-python3}"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
out="${OUT:-gpu-report}"
budget="${GPU_CHECK_BUDGET_S:-480}"
case "$budget" in ''|*[!0-9]*) echo "gpu_check: GPU_CHECK_BUDGET_S must be whole seconds" >&2
                               exit 2 ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/rosetta-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ROSETTA_DATA_DIR="$work/data" ROSETTA_RESULTS_DIR="$work/results"
export ROSETTA_REPORT_DIR="$work/report"
rosetta=("$py" -m rosetta.cli)
common=(--profile ci --executor python --no-report --timeout 300)
backends="${GPU_CHECK_BACKENDS:-torch,jax}"
tf32_backends="${GPU_CHECK_TF32_BACKENDS:-$backends}"
repeat="${GPU_CHECK_REPEAT:-3}"
all4=cnn,gru,resnet50,transformer
workloads="${GPU_CHECK_WORKLOADS:-$all4}"
models="${GPU_CHECK_MODELS:-}"
imported=""
if [ -n "$models" ]; then  # the imported workloads: every spec in that folder
    if ! [ -d "$models" ]; then
        echo "gpu_check: GPU_CHECK_MODELS=${models:0:80} is not a folder of imported specs" >&2
        exit 2
    fi
    models=$(cd "$models" && pwd)
    imported=$(cd "$models" && ls -- *.yaml 2>/dev/null | sed 's/\.yaml$//' | paste -sd, -)
    if [ -z "$imported" ]; then
        echo "gpu_check: GPU_CHECK_MODELS=${models:0:80} holds no *.yaml (run rosetta import)" >&2
        exit 2
    fi
fi
selected=",${GPU_CHECK_BENCHES:-gpu-fp32,gpu-bf16,gpu-tf32,cpu-ref${models:+,gpu-import}},"
# name | weight (its share of the budget) | the bench's arguments
benches=()
for entry in \
    "gpu-fp32|5|--backends $backends --device cuda --workloads $workloads --repeat $repeat" \
    "gpu-bf16|2|--backends $backends --device cuda --workloads $workloads --precisions bf16" \
    "gpu-tf32|2|--backends $tf32_backends --device cuda --workloads resnet50,transformer --tf32" \
    "cpu-ref|1|--backends numpy_ref --device cpu --workloads $all4" \
    "gpu-import|2|--backends $backends --device cuda --workloads $imported"; do
    [ "${entry%%|*}" = gpu-import ] && [ -z "$imported" ] && continue
    [[ "$selected" == *",${entry%%|*},"* ]] && benches+=("$entry")
done
if [ "${#benches[@]}" = 0 ]; then
    echo "gpu_check: GPU_CHECK_BENCHES names none of gpu-fp32, gpu-bf16, gpu-tf32, cpu-ref," \
        "gpu-import (that one needs GPU_CHECK_MODELS)" >&2
    exit 2
fi
bench_env() {  # bench_env NAME: the environment of that bench's commands (the spec folder)
    if [ "$1" = gpu-import ]; then echo "ROSETTA_MODELS=$models"; else echo "ROSETTA_MODELS="; fi
}
weights=0
for entry in "${benches[@]}"; do IFS='|' read -r _ w _ <<<"$entry"; weights=$((weights + w)); done

if [ "$dry" = 1 ]; then
    # the same command lines, planned only; where no GPU is visible, --device cuda must be
    # refused as a user sees it, and the rest of the line must plan on the CPU
    status=0
    for entry in "${benches[@]}"; do
        IFS='|' read -r name _ argv <<<"$entry"
        read -ra args <<<"$argv"
        echo "== $name: rosetta bench ${common[*]} ${args[*]} --run-id $name --dry-run"
        if msg=$(env "$(bench_env "$name")" "${rosetta[@]}" bench "${common[@]}" "${args[@]}" \
                --run-id "$name" --dry-run 2>&1)
        then
            echo "$msg"
            continue
        fi
        echo "$msg"
        if ! grep -qE -- "--(device cuda|tf32)[: ].*no CUDA GPU|--tf32 applies to CUDA only" \
            <<<"$msg"; then
            echo "gpu_check: $name did not plan" >&2
            status=1
            continue
        fi
        cpu=()
        for a in "${args[@]}"; do
            case "$a" in cuda) cpu+=(cpu) ;; --tf32) ;; *) cpu+=("$a") ;; esac
        done
        echo "-- no GPU here: the rest of the line, planned at --device cpu"
        env "$(bench_env "$name")" "${rosetta[@]}" bench "${common[@]}" "${cpu[@]}" \
            --run-id "$name" --dry-run || status=1
    done
    "${rosetta[@]}" data synth --help >/dev/null || status=1
    "${rosetta[@]}" report --help >/dev/null || status=1
    "$py" scripts/gpu_check_summary.py --help >/dev/null || status=1
    [ "$status" = 0 ] && echo "gpu_check: dry run ok (every command line plans)"
    exit "$status"
fi

mkdir -p "$out" || exit 2
log="$out/gpu-check.log"
exec > >(tee "$log") 2>&1
start=$(date +%s)
echo "gpu_check: $(date -u +%FT%TZ), $($py --version 2>&1), budget ${budget} s, work in $work"
if ! nvidia-smi >"$out/nvidia-smi.txt" 2>&1; then
    echo "gpu_check: nvidia-smi failed (no NVIDIA driver?); this check needs an NVIDIA GPU"
    cat "$out/nvidia-smi.txt"
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
    >>"$out/nvidia-smi.txt" 2>&1
head -20 "$out/nvidia-smi.txt"
"$py" -c "import torch, jax; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name(0));
print('jax', jax.__version__, jax.devices())" || echo "gpu_check: torch or jax cannot see the GPU"
"${rosetta[@]}" list || exit 2
t=$(date +%s)
"${rosetta[@]}" data synth --data-dir "$ROSETTA_DATA_DIR" || exit 2
echo "gpu_check: synthetic data in $(($(date +%s) - t)) s"

status=0
ran=()
used=0
for entry in "${benches[@]}"; do
    IFS='|' read -r name w argv <<<"$entry"
    read -ra args <<<"$argv"
    used=$((used + w))  # each bench may run until the end of its share, counted from the start
    left=$((start + budget * used / weights - $(date +%s)))
    if [ "$left" -lt 20 ]; then
        echo "gpu_check: $name not run: its share of the ${budget} s budget is spent"
        status=2
        continue
    fi
    echo "== $name (at most ${left} s): rosetta bench ${common[*]} ${args[*]}"
    t=$(date +%s)
    timeout -s INT -k 30 "$left" env "$(bench_env "$name")" "${rosetta[@]}" bench "${common[@]}" \
        "${args[@]}" --run-id "$name"
    rc=$?
    echo "gpu_check: $name exit $rc in $(($(date +%s) - t)) s"
    [ -d "$ROSETTA_RESULTS_DIR/$name" ] && ran+=("$name")
    case "$rc" in
        0) ;;
        1|3) status=1 ;;
        *) [ "$status" = 0 ] && status=2 ;;
    esac
done

echo "== what ran, read back from the records"
"$py" scripts/gpu_check_summary.py "$ROSETTA_RESULTS_DIR" "${ran[@]}" | tee "$out/check.txt"
case "${PIPESTATUS[0]}" in 0) ;; 1) status=1 ;; *) [ "$status" = 0 ] && status=2 ;; esac
report() {  # report NAME RUN...: the HTML report of the runs that exist (two: compared)
    local name=$1 runs=() r
    shift
    for r in "$@"; do [ -d "$ROSETTA_RESULTS_DIR/$r" ] && runs+=("$r"); done
    [ "${#runs[@]}" -gt 0 ] || return 0
    env "$(bench_env "${runs[0]}")" "${rosetta[@]}" report "${runs[@]}" --name "$name" \
        && cp "$ROSETTA_REPORT_DIR/$name/index.html" "$out/$name.html"
}
report report gpu-fp32 gpu-bf16  # bf16 against fp32
report tf32-report gpu-fp32 gpu-tf32  # TF32 on against off
report cpu-ref-report cpu-ref
report import-report gpu-import
[ "${#ran[@]}" -gt 0 ] && tar -czf "$out/records.tar.gz" -C "$ROSETTA_RESULTS_DIR" "${ran[@]}"
echo "gpu_check: done in $(($(date +%s) - start)) s, exit $status; files in $out"
exit "$status"
