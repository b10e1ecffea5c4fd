#!/usr/bin/env bash
# The main job end to end on this machine: installs deps, builds, trains the demo parent if it
# is absent, starts a coordinator (SQLite in ./tailor-data, local launcher for the multi-rank
# workers) and a local CPU profiler agent serving the contract's engine, submits a contract,
# follows it live and prints the report. Everything started here is stopped on exit.
#   deploy/quickstart.sh [CONTRACT]
# Default: examples/contracts/npc-llama-cpp.textproto, a Nemotron-H checkpoint compressed for
# llama.cpp (AUTOCOMPRESS: profile in llama.cpp -> rank -> search -> distill -> GGUF ->
# equivalence gate -> verify in llama.cpp, with the uniform baseline). Without node or the
# pinned node-llama-cpp it says so and falls back to examples/contracts/npc-cpu.textproto, the
# same contract on tailor's own engine (tailor-builtin) with a tailor-format parent.
# examples/contracts/text-cpu.textproto runs on text instead: its corpus (Debian's license
# texts) and a parent trained on it are written here first (docs/data.md).
# examples/contracts/probe-cpu.textproto is a 2-second smoke test of the same setup.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
DATA_DIR=${TAILOR_DATA_DIR:-$ROOT/tailor-data}
PORT=${TAILOR_PORT:-50051}

bash deploy/install-deps.sh
SIDECAR=tools/llama-sidecar/node_modules/node-llama-cpp
if [[ $# -ge 1 ]]; then
  CONTRACT=$1
elif command -v node >/dev/null && [[ -f "$SIDECAR/package.json" ]]; then
  CONTRACT=examples/contracts/npc-llama-cpp.textproto
else
  echo "== llama.cpp is not available (node or $SIDECAR missing): running the tailor-builtin"
  echo "   contract instead; deploy/install-deps.sh installs it"
  CONTRACT=examples/contracts/npc-cpu.textproto
fi
# The engine the agent serves: the contract's target.engine.
ENGINE=$(sed -n 's/.*engine: *"\([^"]*\)".*/\1/p' "$CONTRACT" | head -n1)
ENGINE=${ENGINE:-tailor-builtin}
deploy/configure.sh "$BUILD_DIR"
cmake --build "$BUILD_DIR" -j"$(nproc)" --target tailor-coordinator tailor tailor-profiler-agent \
  tailor-llama-serve tailor-worker tailor-train-parent
BIN=$ROOT/$BUILD_DIR/bin

# The contracts name the parent by a path relative to the repository root; every process
# below runs from here.
PARENT=tailor-data/models/parent-small
if grep -q "$PARENT" "$CONTRACT" && [[ ! -f "$PARENT/model.safetensors" ]]; then
  echo "== training the demo parent into $PARENT (a few minutes on 2 cores, once)"
  "$BIN/tailor-train-parent" --out "$PARENT"
fi
HYBRID_PARENT=tailor-data/models/parent-nemotron-h
if grep -q "$HYBRID_PARENT" "$CONTRACT" && [[ ! -f "$HYBRID_PARENT/model.safetensors" ]]; then
  echo "== training the demo Nemotron-H parent into $HYBRID_PARENT (HF layout; a few minutes"
  echo "   on 2 cores, once)"
  "$BIN/tailor-train-parent" --out "$HYBRID_PARENT" --layout nemotron-h
fi
TEXT_PARENT=tailor-data/models/parent-text
if grep -q "$TEXT_PARENT" "$CONTRACT" && [[ ! -f "$TEXT_PARENT/model.safetensors" ]]; then
  echo "== writing the Debian text corpus into tailor-data/corpus and training a language model"
  echo "   of it into $TEXT_PARENT (a few minutes on 2 cores, once)"
  "$BIN/tailor-train-parent" --out "$TEXT_PARENT" --debian-corpus tailor-data/corpus \
    --sequence-tokens 64 --steps 300 --batch 32
fi

mkdir -p "$DATA_DIR/logs"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$BIN/tailor-coordinator" --data-dir "$DATA_DIR" --listen "127.0.0.1:$PORT" --http-port 0 \
  >"$DATA_DIR/logs/coordinator.log" 2>&1 &
pids+=($!)
export TAILOR_COORDINATOR=127.0.0.1:$PORT
for _ in $(seq 1 100); do
  grep -q "listening on port" "$DATA_DIR/logs/coordinator.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "listening on port" "$DATA_DIR/logs/coordinator.log" || {
  echo "quickstart: coordinator did not start; see $DATA_DIR/logs/coordinator.log" >&2; exit 1; }

"$BIN/tailor-profiler-agent" --coordinator "$TAILOR_COORDINATOR" --device cpu --engine "$ENGINE" \
  --work-dir "$DATA_DIR/agent-work" >"$DATA_DIR/logs/agent.log" 2>&1 &
pids+=($!)

echo "== submitting $CONTRACT"
out=$("$BIN/tailor" submit "$CONTRACT" --json)
id=$(echo "$out" | jq -r '.id')
"$BIN/tailor" watch "$id"
echo "== report"
"$BIN/tailor" report "$id"
echo "== status --json | jq .state"
"$BIN/tailor" status "$id" --json | jq -r .state
