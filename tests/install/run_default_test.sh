#!/usr/bin/env bash
# tools/run-default.sh, the README's first command, builds only the lathe binary (not the tests
# and benchmarks it does not run) and says what it is doing. Runs it with stand-ins for cmake
# and for the built binary that record their arguments, so it takes seconds.
#
# usage: tests/install/run_default_test.sh
# Needs what tools/setup.sh installs (the Debian packages and the venv with pyarrow) in place.
set -euo pipefail

fail() {
  echo "run_default_test: FAIL: $*" >&2
  exit 1
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/lathe-run-default-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin" "$tmp/build"
for stub in "$tmp/bin/cmake" "$tmp/build/lathe"; do
  printf '#!/bin/sh\necho "$*" >>"%s.calls"\n' "$stub" >"$stub"
  chmod +x "$stub"
done

if ! PATH="$tmp/bin:$PATH" LATHE_BUILD="$tmp/build" "$repo/tools/run-default.sh" \
  >"$tmp/out.log" 2>&1; then
  cat "$tmp/out.log" >&2
  fail "tools/run-default.sh failed"
fi
build=$(grep -- '^--build ' "$tmp/bin/cmake.calls" || true)
[ -n "$build" ] || fail "tools/run-default.sh did not run cmake --build: $(cat "$tmp/bin/cmake.calls")"
case " $build " in
  *" --target lathe "*) ;;
  *) fail "tools/run-default.sh builds more than the lathe binary: cmake $build" ;;
esac
grep -q '^setup: building the lathe binary' "$tmp/out.log" ||
  fail "tools/run-default.sh does not say what it builds: $(cat "$tmp/out.log")"
grep -q '^lab run ' "$tmp/build/lathe.calls" ||
  fail "tools/run-default.sh did not run lathe lab run: $(cat "$tmp/build/lathe.calls" 2>/dev/null)"
echo "run_default_test: tools/run-default.sh builds: cmake $build"
