#!/usr/bin/env bash
# The main job on the bundled default: builds lathe, then runs the compatibility lab over the
# bundled catalog (every tiny checkpoint tests/fixtures/tiny describes): each model in its own
# process is built, loaded, generates 32 greedy tokens and is compared with the outputs
# transformers made for it. Prints the report; the Parquet dataset lands in lab-results/.
# No network (after setup), no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the lathe binary is built here; tools/test.sh builds the tests.
tools/setup.sh --lathe-only
BUILD="${LATHE_BUILD:-build}"
OUT="lab-results/$(date -u +%Y%m%dT%H%M%SZ)"
"$BUILD/lathe" lab run --out "$OUT" "$@"
echo
echo "Explore the results: $BUILD/lathe lab serve --data lab-results   (then open http://127.0.0.1:8080/)"
