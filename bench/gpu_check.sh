#!/usr/bin/env bash
# bench/gpu_check.sh -- the engine's check on a GPU host that has only a C compiler, CMake and
# the CUDA toolkit (nothing else is needed or installed): builds the standalone engine with the
# CUDA backend, runs the GPU tests (CPU/CUDA parity), profiles models on cuda, and measures
# cuBLAS GEMM TFLOP/s and paged decode-attention GB/s. Designed to fit in about 8 minutes.
#
# Everything it leaves is flat in $OUT (at most 8 files):
#   gpu_check.log          the whole run (device, build, tests, timings)
#   ctest-gpu.txt          ctest -L gpu output
#   microbench.txt         GEMM TFLOP/s and decode-attention GB/s
#   cuda-<model>.csv       engine profiles (the models/profiles/ CSV format)
# Usage: OUT=/some/dir bench/gpu_check.sh [model ...]   (default: tiny-dense llama-3.1-8b tiny-moe)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/out/gpu-check}
BUILD=${BUILD:-$ROOT/build-gpu}
JOBS=$(nproc 2>/dev/null || echo 8)
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(tiny-dense llama-3.1-8b tiny-moe)
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
: >"$LOG"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }
run() { say "\$ $*"; "$@" >>"$LOG" 2>&1; local rc=$?; [ $rc -ne 0 ] && say "exit $rc"; return $rc; }
START=$SECONDS

say "kvfleet gpu check in $ROOT -> $OUT"
command -v nvidia-smi >/dev/null && run nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
run "$NVCC" --version

# 1. build (standalone engine: C compiler + CUDA toolkit only)
if ! run cmake -S "$ROOT" -B "$BUILD" -DKVFLEET_ENGINE_ONLY=ON -DKVFLEET_CUDA=ON \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC"; then
    say "configure failed"; exit 1
fi
if ! run cmake --build "$BUILD" -j "$JOBS"; then
    say "build failed"; exit 1
fi
ENGINE=$BUILD/kvfleet-engine
say "build done at +$((SECONDS - START)) s"

# 2. GPU tests (parity with the CPU backend)
(cd "$BUILD" && timeout 240 ctest -L gpu --output-on-failure) >"$OUT/ctest-gpu.txt" 2>&1
say "ctest -L gpu: exit $? (see ctest-gpu.txt) at +$((SECONDS - START)) s"
tail -5 "$OUT/ctest-gpu.txt" >>"$LOG"

# 3. microbenchmarks: cuBLAS bf16 GEMMs and paged decode attention
{
    echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
    echo "# H200 reference peaks: ~989 TFLOP/s dense bf16, ~4.8 TB/s HBM3e"
    timeout 90 "$ENGINE" bench gemm --backend cuda
    timeout 60 "$ENGINE" bench attn --backend cuda
} >"$OUT/microbench.txt" 2>&1
say "microbench: exit $? at +$((SECONDS - START)) s"
cat "$OUT/microbench.txt" >>"$LOG"

# 4. profiles on cuda (full sweep; rows that do not fit the KV arena are skipped)
for m in "${MODELS[@]}"; do
    left=$((470 - (SECONDS - START)))
    if [ $left -lt 40 ]; then
        say "skipping profile of $m: time budget spent"
        continue
    fi
    limit=$((left < 240 ? left : 240))
    say "profile $m (limit ${limit}s)"
    timeout "$limit" "$ENGINE" profile --model "$m" --backend cuda -o "$OUT/cuda-$m.csv" \
        2>>"$LOG"
    rc=$?
    rows=$(grep -vc '^#' "$OUT/cuda-$m.csv" 2>/dev/null)
    say "profile $m: exit $rc at +$((SECONDS - START)) s (${rows:-0} csv lines)"
    [ "${rows:-0}" = 0 ] && rm -f "$OUT/cuda-$m.csv"
done
say "done in $((SECONDS - START)) s; files: $(ls "$OUT" | tr '\n' ' ')"
