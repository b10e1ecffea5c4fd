#!/usr/bin/env bash
# The one configure step of deploy/quickstart.sh and deploy/test.sh: the same build directory
# with the same flags, so running the README's two commands in turn builds once.
#   deploy/configure.sh [BUILD_DIR]      default: $BUILD_DIR or build
#   TEST_DEBUG_INFO=1   add -g (debuggable binaries; slower to build and link)
#   TEST_BENCH=1        configure the benchmarks even without tests (with tests, the default,
#                       they are always built: their --quick smoke tests run with ctest)
# RelWithDebInfo's -O2 (the code the tests have always checked) without -g, which mostly costs
# compile and link time in the LibTorch translation units: the CI budget is 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${BUILD_DIR:-build}}
CONFIG_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${TEST_DEBUG_INFO:-0}" != 1 ]; then
  CONFIG_ARGS+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"
                "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG")
else
  CONFIG_ARGS+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g -DNDEBUG"
                "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g -DNDEBUG")
fi
if [ "${TEST_BENCH:-0}" = 1 ]; then
  CONFIG_ARGS+=(-DTAILOR_BUILD_BENCH=ON)
else
  CONFIG_ARGS+=(-DTAILOR_BUILD_BENCH=OFF)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja "${CONFIG_ARGS[@]}" >/dev/null
