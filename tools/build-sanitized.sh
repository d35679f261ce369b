#!/usr/bin/env bash
# Builds build-san/: lathe, its tests and the libFuzzer targets, all compiled by clang with
# AddressSanitizer and UndefinedBehaviorSanitizer (any UB finding aborts) and libFuzzer's
# coverage instrumentation, at -O1 with line tables. One build serves both
# tools/test-sanitize.sh (the whole test suite) and tools/fuzz.sh (the fuzz targets).
# Installs clang and libFuzzer's runtime when missing (Debian 12: clang 14, whose
# libclang_rt.fuzzer is in libclang-rt-14-dev).
# Usage: tools/build-sanitized.sh [CMAKE_TARGET...]   (default: everything; LATHE_SAN_BUILD
# overrides build-san)
set -euo pipefail
cd "$(dirname "$0")/.."
LATHE_SETUP_NO_BUILD=1 tools/setup.sh --python >/dev/null ||
  { echo "build-sanitized: setup failed" >&2; exit 1; }
need=()
command -v clang++ >/dev/null 2>&1 || need+=(clang)
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  v="$(clang++ --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p')"
  need+=("libclang-rt-${v:-14}-dev")
fi
if ((${#need[@]})); then
  echo "build-sanitized: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

BUILD="${LATHE_SAN_BUILD:-build-san}"
VENV="${LATHE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/venv}"
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DLATHE_FUZZ=ON -DLATHE_BUILD_TESTS=ON \
  -DLATHE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" \
  -DLATHE_PYTHON="$VENV/bin/python" "${LAUNCHER[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
started=$SECONDS
cmake --build "$BUILD" -j"$(nproc)" "${targets[@]}"
echo "build-sanitized: $BUILD built in $((SECONDS - started)) s" >&2
