#!/usr/bin/env bash
# specbench GPU check: everything that needs a CUDA device, in one run of under 9 minutes.
#
#   1. the CUDA-marked tests (pytest -m cuda; test_kernels.py runs in step 2)
#   2. the Triton kernel tests compiled for the GPU (tests/test_kernels.py, TRITON_INTERPRET unset)
#   3. scripts/bench_kernels.py --quick (kernel vs torch reference, GB/s)
#   4. cost profiles in bf16 with random weights of a Llama-3.2-1B-shaped and a Llama-3.1-8B-shaped
#      architecture (scripts/gpu_configs/), the 8B one with the 1B one and n-gram lookup as drafters
#   5. GPU busy time per step of the own decoder (scripts/gpu_busy.py, Llama-3.2-1B shape): decode and
#      verify(5), eager and compiled with CUDA graphs (torch.compile mode="reduce-overhead")
#   6. energy per token (scripts/energy_check.py): a small own-engine sweep on the GPU whose records carry NVML's
#      energy above idle power (energy_j, joules_per_token, joules_per_accepted), and the energy-optimal γ beside
#      the throughput-optimal one; needs nvidia-ml-py (pip install 'specbench[energy]', or WHEELS=DIR holding its
#      wheel for an offline machine)
#
# Everything lands in $OUT (default /tmp/specbench-gpu-check): summary.md (environment, each step's
# result and time, the profiles as tables, what γ a constant α would get per batch size), gpu_check.log
# (all output), kernels.json, energy.json (step 6), and the profile folders profile-1b/ and profile-8b/ (run.json +
# profile.parquet, usable with `specbench recommend RESULTS --cost-profile $OUT/profile-8b` anywhere).
#
# Needs: a CUDA GPU, python3 with torch (CUDA build), transformers, triton, pandas, pyarrow, scipy,
# typer, rich, pyyaml, psutil, pytest. No network: specbench itself is installed from this checkout
# with pip --no-deps --no-index (or, failing that, made importable in place). Without a CUDA device
# it stops at once with exit code 2. Each step has its own time limit; a step that fails or runs out
# is reported in summary.md and the later steps still run (exit code 1 at the end).
#
# On any CUDA machine (docs/profile.md, "Running the GPU check"):
#   OUT=/tmp/specbench-gpu-check bash scripts/gpu_check.sh     # then copy $OUT back
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=${OUT:-/tmp/specbench-gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SPECBENCH_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
unset TRITON_INTERPRET
STEPS="$(mktemp)"
WORK="$(mktemp -d)"
trap 'rm -rf "$STEPS" "$WORK"' EXIT
START=$SECONDS

say() { echo "gpu_check: $*" | tee -a "$LOG"; }

# ---------------------------------------------------------------------------------- 0. a CUDA device?
if ! "$PY" - >>"$LOG" 2>&1 <<'EOF'
import sys
try:
    import torch
except Exception as exc:
    print(f"torch cannot be imported: {exc}")
    sys.exit(1)
if not torch.cuda.is_available():
    print(f"torch {torch.__version__} sees no CUDA device")
    sys.exit(1)
print(f"CUDA device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, CUDA {torch.version.cuda}")
EOF
then
    echo "gpu_check: no CUDA device (or no torch) for $PY — this check needs a GPU; see $LOG" >&2
    tail -n 1 "$LOG" >&2
    exit 2
fi
tail -n 1 "$LOG"

# ---------------------------------------------------------------------------------- specbench importable
importable() { "$PY" -c "import specbench_kernels, specbench.builtin_workloads, specbench.cli" >/dev/null 2>&1; }
if ! importable; then
    say "installing specbench from $ROOT (pip --no-deps --no-index --no-build-isolation -e .)"
    "$PY" -m pip install -q --no-deps --no-index --no-build-isolation -e "$ROOT" >>"$LOG" 2>&1 || true
fi
if ! importable; then
    # the package maps workloads/ and trees/ into specbench.*: links in this checkout do the same
    say "pip could not install it: linking workloads/ and trees/ into specbench/ instead"
    ln -sfn ../workloads specbench/builtin_workloads
    ln -sfn ../trees specbench/builtin_trees
    trap 'rm -rf "$STEPS" "$WORK"; rm -f specbench/builtin_workloads specbench/builtin_trees' EXIT
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! importable; then
    say "specbench cannot be imported with $PY (missing packages?)"
    "$PY" -c "import specbench.cli" 2>&1 | tail -n 3 | tee -a "$LOG" >&2
    exit 2
fi

# ---------------------------------------------------------------------------------- steps
# step NAME LIMIT_S COMMAND...: run with a time limit, log everything, remember result and seconds
FAILED=0
step() {
    local name=$1 limit=$2
    shift 2
    say "== $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG" | tee "$WORK/$name.out" | tail -n 4
    local rc=${PIPESTATUS[0]}
    local result="ok"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then result="timed out after ${limit}s"; FAILED=1
    elif [ "$rc" -ne 0 ]; then result="failed (exit $rc)"; FAILED=1; fi
    printf '%s\t%s\t%s\n' "$name" "$result" "$((SECONDS - t0))" >>"$STEPS"
    say "== $name: $result in $((SECONDS - t0))s"
}

PROFILE_GRID=(--device cuda --dtype bf16 --batch 1,4,16,64 --context 512,2048 --verify-tokens 1,2,3,4,6,8,12,16
              --repeats 7 --warmup 2 --force)

step cuda-tests 90 "$PY" -m pytest -m cuda -p no:cacheprovider -q -rs --ignore=tests/test_kernels.py tests
step kernel-tests 120 "$PY" -m pytest -m "not heavy" -p no:cacheprovider -q -rs tests/test_kernels.py
step kernel-bench 50 "$PY" scripts/bench_kernels.py --quick --warmup 5 --reps 20 --json "$OUT/kernels.json"
step profile-1b 60 "$PY" -m specbench profile --target scripts/gpu_configs/llama-3.2-1b --drafter ngram \
    "${PROFILE_GRID[@]}" --out "$OUT/profile-1b"
step profile-8b 100 "$PY" -m specbench profile --target scripts/gpu_configs/llama-3.1-8b \
    --drafter scripts/gpu_configs/llama-3.2-1b --drafter ngram "${PROFILE_GRID[@]}" --out "$OUT/profile-8b"

step gpu-busy 75 "$PY" scripts/gpu_busy.py scripts/gpu_configs/llama-3.2-1b --compile

# energy per token needs NVML's Python bindings: installed from WHEELS=DIR when the machine has no index
if ! "$PY" -c "import pynvml" >/dev/null 2>&1 && [ -n "${WHEELS:-}" ]; then
    say "installing nvidia-ml-py from $WHEELS"
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" nvidia-ml-py >>"$LOG" 2>&1 || true
fi
step energy 120 "$PY" scripts/energy_check.py --out "$WORK/energy-check" --summary "$OUT/energy.json" --device cuda

# the profile folders' lock files are not results, and the device tool brings back at most 8 files
find "$OUT" -name .specbench.lock -delete

# ---------------------------------------------------------------------------------- summary.md
"$PY" scripts/gpu_check_summary.py --out "$OUT" --work "$WORK" --steps "$STEPS" \
    --elapsed $((SECONDS - START)) 2>&1 | tee -a "$LOG"

say "done in $((SECONDS - START))s; results in $OUT"
cat "$STEPS" | tee -a "$LOG"
exit $FAILED
