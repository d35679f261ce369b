#!/usr/bin/env bash
# Runs the whole test suite in the sanitizer build (tools/build-sanitized.sh: clang, ASan and
# UBSan; tests that start the lathe binary start the sanitized one), then checks that a
# `lathe generate` run on a tiny checkpoint leaks nothing. Any sanitizer report fails the run.
# Usage: tools/test-sanitize.sh        (LATHE_SAN_BUILD overrides build-san)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${LATHE_SAN_BUILD:-build-san}"
tools/build-sanitized.sh

# abort_on_error: a report kills the process, so no test can pass over one.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The real-model tests, as tools/test.sh runs them, when the SmolLM2 checkpoint is there.
SMOL="${LATHE_SMOLLM2_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/smollm2-135m-instruct}"
[ -f "$SMOL/config.json" ] && export LATHE_SMOLLM2_DIR="$SMOL"

started=$SECONDS
# The sharded runs' workers (mpirun over lathe) are left out: Open MPI's own allocations
# would read as leaks. Their rank graphs run here as threads (Tiny/RankGraph.*).
# The op bench's cases and the golden tests run below, each suite in one process per core:
# as ctest entries every case pays the sanitized binary's start and its static cases (the op
# bench's 468 cases took 755 s of CPU that way, 10 s in one process).
batched='Ops/OpBench\.|Tiny/Golden\.'
(cd "$BUILD" && ctest --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900 \
  -E "^(Workers\.|Shard/TinyCheck\.|$batched)")
# Runs the tests of `binary` matching `filter` in $(nproc) shards at once (gtest's sharding),
# from the source folder and with the compile cache that ctest gives them (tests/CMakeLists.txt).
run_sharded() {
  local binary=$1 filter=$2 shards pids=() i cache
  cache="$(cd "$BUILD" && pwd)/test-compile-cache"
  # A filter that matched nothing would pass silently. (grep -c reads the whole list: grep -q
  # would stop early, and the listing binary's SIGPIPE fail the pipe under pipefail.)
  local listed
  listed=$("$binary" --gtest_list_tests --gtest_filter="$filter" | grep -c '^  ' || true)
  if [ "${listed:-0}" -eq 0 ]; then
    echo "test-sanitize: no test of $binary matches $filter" >&2
    return 1
  fi
  shards=$(nproc)
  for ((i = 0; i < shards; i++)); do
    LATHE_CACHE_DIR="$cache" GTEST_TOTAL_SHARDS=$shards \
      GTEST_SHARD_INDEX=$i timeout 1800 "$binary" \
      --gtest_filter="$filter" --gtest_brief=1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do
    wait "$i" || { echo "test-sanitize: $binary --gtest_filter=$filter failed" >&2; return 1; }
  done
}
run_sharded "$BUILD/tests/backends/op_tests" 'Ops/OpBench.*'
run_sharded "$BUILD/tests/models/model_tests" 'Tiny/Golden.*'
echo "test-sanitize: tests ran in $((SECONDS - started))s" >&2

# Leak check of one whole generate run (LeakSanitizer reports at exit; exit code 23 on a leak).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BUILD/lathe" tiny build tests/fixtures/tiny/llama_tied_gqa "$tmp/ckpt" >/dev/null
if ! ASAN_OPTIONS="$ASAN_OPTIONS:exitcode=23" "$BUILD/lathe" generate "$tmp/ckpt" \
  --prompt-ids "[1, 2, 3]" --max-new-tokens 8 >"$tmp/out" 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  echo "test-sanitize: lathe generate failed or leaked under the sanitizers" >&2
  exit 1
fi
if grep -q "LeakSanitizer\|AddressSanitizer\|runtime error" "$tmp/err"; then
  cat "$tmp/err" >&2
  echo "test-sanitize: sanitizer report from lathe generate" >&2
  exit 1
fi
echo "test-sanitize: lathe generate ran without a leak" >&2
