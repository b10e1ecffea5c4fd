#!/usr/bin/env bash
# The sanitizer stage (docs/reliability.md "Sanitizers"): builds with clang only what does
# not link LibTorch (common, storage, coordinator, cli, the agent, the torch-free compression
# libraries: config, safetensors, archive, entropy codec), every build with clang's
# -Wthread-safety as an error, runs the library tests under the sanitizer, then (asan) each
# fuzzer for a bounded time on its seed corpus.
#   deploy/sanitize.sh            asan: every torch-free target (so the thread-safety check
#                                 covers all of them) under AddressSanitizer + UBSan; library
#                                 tests + 15 s per fuzzer
#   deploy/sanitize.sh tsan       ThreadSanitizer, library tests only
#   deploy/sanitize.sh tsafety    the thread-safety check alone, at -O0: build only, since a
#                                 missing lock is a compile error and there is nothing to run
#   FUZZ_SECONDS=300 deploy/sanitize.sh     longer fuzzing
#   TAILOR_BUILD_LOCK=/tmp/x.lock deploy/sanitize.sh   configure+build under flock
# Build dirs: build-asan / build-tsan / build-tsafety (CMakePresets.json).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-asan}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
case "$MODE" in
  asan|tsan|tsafety) ;;
  *) echo "usage: $0 [asan|tsan|tsafety]" >&2; exit 2 ;;
esac
locked() {
  if [ -n "${TAILOR_BUILD_LOCK:-}" ]; then flock "$TAILOR_BUILD_LOCK" "$@"; else "$@"; fi
}

t0=$(date +%s)
locked cmake --preset "$MODE" > /dev/null
locked cmake --build --preset "$MODE" -j"$JOBS"
t1=$(date +%s)
if [ "$MODE" = tsafety ]; then
  echo "sanitize tsafety: build $((t1 - t0)) s, no thread-safety warning"
  exit 0
fi
ctest --preset "$MODE" -j"$JOBS" --timeout 600
t2=$(date +%s)
if [ "$MODE" = asan ]; then
  deploy/fuzz.sh --build-dir build-asan --seconds "$FUZZ_SECONDS"
fi
t3=$(date +%s)
echo "sanitize $MODE: build $((t1 - t0)) s, tests $((t2 - t1)) s, fuzzing $((t3 - t2)) s," \
     "total $((t3 - t0)) s"
