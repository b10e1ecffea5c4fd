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
  # Parents' SentencePiece tokenizer.model files (compression/tokenizer), and spm_train,
  # which the tokenizer tests train a model with.
  libsentencepiece-dev sentencepiece
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
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# llama.cpp through node-llama-cpp, pinned, with its prebuilt linux-x64 CPU binaries
# (tools/llama-sidecar: the GGUF export's equivalence tests and, later, the llama.cpp engine).
# SKIP_DOWNLOAD: never build llama.cpp from source at install time. Skipped when the pinned
# version is already there.
NODE_LLAMA_CPP_VERSION=3.21.1
SIDECAR_DIR="$(cd "$(dirname "$0")/.." && pwd)/tools/llama-sidecar"
installed="$(node -p "require('$SIDECAR_DIR/node_modules/node-llama-cpp/package.json').version" \
  2>/dev/null || true)"
if [ "$installed" = "$NODE_LLAMA_CPP_VERSION" ] &&
   [ -d "$SIDECAR_DIR/node_modules/@node-llama-cpp/linux-x64" ]; then
  echo "install-deps: node-llama-cpp $NODE_LLAMA_CPP_VERSION present"
else
  echo "install-deps: installing node-llama-cpp $NODE_LLAMA_CPP_VERSION into $SIDECAR_DIR"
  (cd "$SIDECAR_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm i --no-audit --no-fund -E \
    "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" "@node-llama-cpp/linux-x64@$NODE_LLAMA_CPP_VERSION")
fi
echo "install-deps: done"
