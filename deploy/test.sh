#!/usr/bin/env bash
# The README's test command: configure, build everything, run every test with ctest.
#   deploy/test.sh            build + all tests
#   BUILD_DIR=... deploy/test.sh   use another build directory
#   deploy/test.sh --full     also longer fuzzing (5 min per target) and ThreadSanitizer,
#                             300 seeded fault runs and a 30-minute soak
#   SKIP_SANITIZE=1 deploy/test.sh  without the sanitizer stage
# Then the sanitizer stage (deploy/sanitize.sh, docs/reliability.md): everything without
# LibTorch built once with clang under ASan+UBSan and its thread-safety analysis as an error,
# the library tests run under the sanitizers, and each fuzzer for a bounded time.
set -euo pipefail
FULL=0
if [ "${1:-}" = "--full" ]; then FULL=1; shift; fi
# --full also runs 300 seeded fault runs and the 30-minute soak (docs/reliability.md); the
# default is 50 runs and a 45-second soak.
if [ "$FULL" = 1 ]; then
  export TAILOR_FAULT_RUNS=${TAILOR_FAULT_RUNS:-300}
  export TAILOR_SOAK_DURATION=${TAILOR_SOAK_DURATION:-1800}
  export TAILOR_SOAK_RESTART_EVERY=${TAILOR_SOAK_RESTART_EVERY:-600}
fi
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

# The same configure step as deploy/quickstart.sh (deploy/configure.sh: flags, benchmarks),
# so the README's two commands in turn build once.
deploy/configure.sh "$BUILD_DIR"
cmake --build "$BUILD_DIR" -j"$JOBS"
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$JOBS" --timeout 900 "$@")

if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  if [ "$FULL" = 1 ]; then
    FUZZ_SECONDS=${FUZZ_SECONDS:-300} deploy/sanitize.sh asan
    deploy/sanitize.sh tsan
  else
    deploy/sanitize.sh asan
  fi
fi
