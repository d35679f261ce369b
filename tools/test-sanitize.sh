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
(cd "$BUILD" && ctest --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900 \
  -E '^(Workers\.|Shard/TinyCheck\.)')
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
