#!/usr/bin/env bash
# Time to first token of the compiled mode cold (compiling into an emptied cache), warm (every
# module read from the cache) and of an uncompiled run, in turn, ROUNDS times; one line per run:
#   MODE TTFT_S PREFILL_TOK_S DECODE_TOK_S COMPILE_S MODULES_COMPILED MODULES_LOADED VARIANTS_TIMED
# Usage: bench/compile/cold_warm.sh MODEL [PROMPT_TOKENS=512] [THREADS=2] [ROUNDS=3]
# (docs/compile-cache.md, "Measured"). LATHE overrides build/lathe.
set -euo pipefail
MODEL=${1:?usage: bench/compile/cold_warm.sh MODEL [PROMPT_TOKENS] [THREADS] [ROUNDS]}
PROMPT=${2:-512}
THREADS=${3:-2}
ROUNDS=${4:-3}
LATHE=${LATHE:-$(dirname "$0")/../../build/lathe}
CACHE=$(mktemp -d)
trap 'rm -rf "$CACHE"' EXIT
for _ in $(seq "$ROUNDS"); do
  rm -rf "${CACHE:?}"/*
  for mode in cold warm uncompiled; do
    flags=(--compiled --cache-dir "$CACHE")
    [ "$mode" = uncompiled ] && flags=()
    "$LATHE" bench "$MODEL" --prompt-tokens "$PROMPT" --new-tokens 8 --warmup 0 --repeat 1 \
      --threads "$THREADS" --json "${flags[@]}" |
      python3 -c "
import json, sys
d = json.load(sys.stdin); c = d['compiled'] or {}
print('$mode', round(d['time_to_first_token_seconds'], 3), round(d['prefill_tokens_per_second'], 1),
      round(d['decode_tokens_per_second'], 2), round(c.get('seconds', 0), 4),
      c.get('modules_compiled', 0), c.get('modules_loaded', 0), c.get('variants_timed', 0))"
  done
done
