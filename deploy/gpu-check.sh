#!/usr/bin/env bash
# GPU check of the CUDA fused decode-GEMV (docs/entropy.md "CUDA kernel"). Run on the GPU
# machine from the repo root: configures a CUDA-only build (TAILOR_ENTROPY_CUDA_ONLY: the
# entropy library, its CUDA test and bench; no LibTorch), runs the test and the bench, and
# writes JSON to $OUT (default ./gpu-check-out).
#   OUT=dir BUILD_DIR=build-entropy-cuda ROWS=4096 COLS=4096 deploy/gpu-check.sh
# Needs cmake, ninja or make, nvcc, Abseil, GTest and nlohmann_json (CMAKE_PREFIX_PATH for
# a carried prefix).
set -uo pipefail
OUT=${OUT:-gpu-check-out}
BUILD_DIR=${BUILD_DIR:-build-entropy-cuda}
ROWS=${ROWS:-4096}
COLS=${COLS:-4096}
mkdir -p "$OUT"
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
GEN=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
status() { printf '{"stage": "%s", "rc": %d}\n' "$1" "$2" > "$OUT/status.json"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cmake -S . -B "$BUILD_DIR" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DTAILOR_ENTROPY_CUDA_ONLY=ON \
  -DTAILOR_WITH_TORCH=OFF -DCMAKE_CUDA_COMPILER="$NVCC" > "$OUT/configure.log" 2>&1 \
  || { status configure $?; tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j"$(nproc)" --target compression_entropy_cuda_test bench_entropy \
  > "$OUT/build.log" 2>&1 || { status build $?; tail -30 "$OUT/build.log"; exit 1; }
"$BUILD_DIR/bin/compression_entropy_cuda_test" --gtest_output="json:$OUT/test.json" \
  > "$OUT/test.log" 2>&1
test_rc=$?
tail -15 "$OUT/test.log"
# CUDA rows only (fixed configurations, no CPU autotune: minutes matter on a lent machine),
# at the requested shape, then the usual bench at its default 2048x2048 with CUDA rows.
timeout 240 "$BUILD_DIR/bin/bench_entropy" --rows "$ROWS" --cols "$COLS" --cuda-only 1 \
  --json "$OUT/bench_cuda.json" > "$OUT/bench_cuda.log" 2>&1
bench_rc=$?
cat "$OUT/bench_cuda.log"
if [ "${FULL_BENCH:-0}" = 1 ]; then
  timeout 300 "$BUILD_DIR/bin/bench_entropy" --threads "$(nproc)" --json "$OUT/bench.json" \
    > "$OUT/bench.log" 2>&1
fi
printf '{"stage": "done", "test_rc": %d, "bench_rc": %d}\n' "$test_rc" "$bench_rc" \
  > "$OUT/status.json"
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]
