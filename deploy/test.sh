#!/usr/bin/env bash
# The README's test command: configure, build everything, run every test with ctest.
#   deploy/test.sh            build + all tests
#   BUILD_DIR=... deploy/test.sh   use another build directory
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j"$JOBS"
cd "$BUILD_DIR"
ctest --output-on-failure -j"$JOBS" --timeout 900 "$@"
