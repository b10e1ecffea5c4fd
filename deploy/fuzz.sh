#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz, docs/reliability.md "Fuzzing") for a bounded time
# each, starting from the committed seed corpora. New inputs go to BUILD_DIR/fuzz-corpus (not
# the repository); a crash leaves its input in BUILD_DIR/fuzz-artifacts/<target>/ and fails
# the run: copy it to tests/fuzz/regressions/<target>/ with the fix, where the replay tests
# keep it fixed.
#   deploy/fuzz.sh                       every target, 15 s each (the CI's bounded run)
#   deploy/fuzz.sh --seconds 600 safetensors model_config    longer, on demand
#   BUILD_DIR=build-asan (default)       a TAILOR_FUZZ build (cmake --preset asan)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
SECONDS_EACH=15
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
if [ ${#TARGETS[@]} -eq 0 ]; then
  for d in tests/fuzz/corpus/*/; do TARGETS+=("$(basename "$d")"); done
fi

# Leaks count as crashes; UBSan already aborts (-fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TAILOR_FUZZ_TMPDIR=${TAILOR_FUZZ_TMPDIR:-$(mktemp -d)}
trap 'rm -rf "$TAILOR_FUZZ_TMPDIR"' EXIT

failed=0
summary=()
for t in "${TARGETS[@]}"; do
  bin="$BUILD_DIR/bin/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin not built (cmake --preset asan && cmake --build --preset asan)" >&2
    exit 2
  fi
  work="$BUILD_DIR/fuzz-corpus/$t"
  artifacts="$BUILD_DIR/fuzz-artifacts/$t/"
  log="$BUILD_DIR/fuzz-logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  dirs=("$work" "tests/fuzz/corpus/$t")
  if [ -d "tests/fuzz/regressions/$t" ]; then dirs+=("tests/fuzz/regressions/$t"); fi
  start=$(date +%s)
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: more memory is a bug.
  if "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts" -print_final_stats=1 \
      "${dirs[@]}" > "$log" 2>&1; then
    result=ok
  else
    result="CRASH (input in $artifacts; log $log)"
    failed=1
    tail -40 "$log" >&2
  fi
  elapsed=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  corpus=$(find "$work" -type f | wc -l)
  summary+=("$(printf '%-20s %5ss %10s execs  cov %6s  corpus %5s  %s' "$t" "$elapsed" "$execs" "$cov" "$corpus" "$result")")
done

echo "fuzz summary ($SECONDS_EACH s per target, build $BUILD_DIR):"
printf '  %s\n' "${summary[@]}"
exit $failed
