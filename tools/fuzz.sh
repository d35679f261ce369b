#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang and runs each for SECONDS (default 30) on a
# copy of its seed corpus. Fails when any target crashes, leaks, hangs past -timeout or runs
# out of memory; the reproducer is kept in build-san/artifacts/TARGET/. The targets are built
# by tools/build-sanitized.sh, in the sanitizer build the test suite also uses.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]     (LATHE_SAN_BUILD overrides build-san)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-30}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(fuzz_safetensors fuzz_config fuzz_tokenizer_load fuzz_tokenizer_encode
    fuzz_chat_template fuzz_dataset fuzz_http)
fi

BUILD="${LATHE_SAN_BUILD:-build-san}"
tools/build-sanitized.sh "${TARGETS[@]}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
failed=()
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t"
  artifacts="$BUILD/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  # The run grows a copy of the seeds; the committed corpus stays the seeds only.
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s" >&2
  if ! "$BUILD/fuzz/$t" "$corpus" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" >"$BUILD/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; log $BUILD/$t.log, reproducer in $artifacts/" >&2
    grep -E "ERROR|SUMMARY|Test unit written" "$BUILD/$t.log" | head -5 >&2 || true
    failed+=("$t")
  fi
  grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD/$t.log" >&2 || true
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets ran ${SECONDS_PER_TARGET}s each without a finding" >&2
