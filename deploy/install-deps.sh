#!/usr/bin/env bash
# Installs every Debian package tailor needs to build, test and run its benchmarks.
# Idempotent: packages already present are skipped, so CI and developers can run it every time.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libsqlite3-dev sqlite3 libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libzstd-dev
  libtorch-dev libgloo-dev
  # LibTorch from Debian calls whatever libblas.so.3 points to; the reference BLAS makes a
  # training step ~7x slower than OpenBLAS.
  libopenblas0-openmp
  jq procps psmisc curl
  # deploy/dev-ca.sh: the local CA and server certificate for TLS tests and development.
  openssl
  # A real single-node Slurm for `--launcher slurm` and its e2e tests (deploy/dev-slurm/).
  slurm-wlm munge
  # The sanitizer and fuzzing stage (deploy/sanitize.sh): clang, libFuzzer and the sanitizer
  # runtimes, llvm-symbolizer for readable stacks.
  clang libclang-rt-14-dev llvm
  # /metrics (Prometheus text format) and the dashboard: its charts are bundled with npm
  # (web/, tests/browser/; npm ships with NodeSource's nodejs, else Debian's npm package) and
  # its browser test drives Debian's headless chromium.
  prometheus-cpp-dev chromium nodejs
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
