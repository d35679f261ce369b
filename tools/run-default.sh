#!/usr/bin/env bash
# The main job on the bundled default: builds lathe, regenerates every tiny checkpoint the
# repository describes (tests/fixtures/tiny), runs each and compares it with the goldens
# transformers made: teacher-forced logits and 32 greedy tokens. No network, no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD="${LATHE_BUILD:-build}"
"$BUILD/lathe" tiny check
"$BUILD/lathe" tiny check --storage bf16
