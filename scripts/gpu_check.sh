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
#   2. torch and jax at --device cuda on cnn, gru, resnet50 and the transformer, the ci profile,
#      fp32 and bf16, the training run + 2 timing rounds (TF32 off: fp32 means fp32);
#   3. the same two on the matmul-heavy cells (resnet50, transformer) with --tf32, fp32;
#   4. numpy_ref on the CPU, every workload (the gate's reference, timed as a backend);
#   5. the reports (the CUDA run alone; TF32 on against off) and a table of what ran, read back
#      from the records: device, gate verdict, step time, autotune, layout, TF32 in effect.
# Everything lands in $OUT when it is set, else gpu-report/: gpu-check.log, nvidia-smi.txt,
# check.txt (the table), report.html, tf32-report.html, records.tar.gz (every run's records).
# GPU_CHECK_BUDGET_S (default 480) bounds the benches: a bench still running at its share of
# the budget is interrupted (its records so far kept) so the reports are always written.
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
gpu=(--backends torch,jax --device cuda)
# name | share of the budget (the end of its slot, in percent) | the bench's arguments
benches=(
    "gpu|70|${gpu[*]} --workloads cnn,gru,resnet50,transformer --precisions fp32,bf16 --repeat 3"
    "gpu-tf32|88|${gpu[*]} --workloads resnet50,transformer --tf32 --repeat 3"
    "cpu-ref|100|--backends numpy_ref --workloads cnn,gru,resnet50,transformer --device cpu"
)

if [ "$dry" = 1 ]; then
    # the same command lines, planned only; where no GPU is visible, --device cuda must be
    # refused as a user sees it, and the rest of the line must plan on the CPU
    status=0
    for entry in "${benches[@]}"; do
        IFS='|' read -r name _ argv <<<"$entry"
        read -ra args <<<"$argv"
        echo "== $name: rosetta bench ${common[*]} ${args[*]} --run-id $name --dry-run"
        if msg=$("${rosetta[@]}" bench "${common[@]}" "${args[@]}" --run-id "$name" --dry-run 2>&1)
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
        "${rosetta[@]}" bench "${common[@]}" "${cpu[@]}" --run-id "$name" --dry-run || status=1
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
for entry in "${benches[@]}"; do
    IFS='|' read -r name share argv <<<"$entry"
    read -ra args <<<"$argv"
    left=$((start + budget * share / 100 - $(date +%s)))
    if [ "$left" -lt 20 ]; then
        echo "gpu_check: $name not run: its share of the ${budget} s budget is spent"
        status=2
        continue
    fi
    echo "== $name (at most ${left} s): rosetta bench ${common[*]} ${args[*]}"
    t=$(date +%s)
    timeout -s INT -k 30 "$left" "${rosetta[@]}" bench "${common[@]}" "${args[@]}" --run-id "$name"
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
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ "${#ran[@]}" -gt 0 ]; then
    "${rosetta[@]}" report "${ran[0]}" --name gpu && cp "$ROSETTA_REPORT_DIR/gpu/index.html" \
        "$out/report.html"
    if [ -d "$ROSETTA_RESULTS_DIR/gpu-tf32" ]; then
        "${rosetta[@]}" report gpu gpu-tf32 --name tf32 && cp "$ROSETTA_REPORT_DIR/tf32/index.html" \
            "$out/tf32-report.html"
    fi
    tar -czf "$out/records.tar.gz" -C "$ROSETTA_RESULTS_DIR" "${ran[@]}"
fi
echo "gpu_check: done in $(($(date +%s) - start)) s, exit $status; files in $out"
exit "$status"
