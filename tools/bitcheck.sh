#!/usr/bin/env bash
# Compares two lathe builds bit for bit on every tiny fixture: teacher-forced logits and hidden
# states (`lathe logits --hidden-states`) and 12 greedy tokens, in each mode (f32 and bf16
# weights; the fast kernels, the reference kernels, eager and compiled), on every kernel level
# this CPU runs. For refactors that must not change a bit: run it with the build before the
# change and the build after.
# Usage: tools/bitcheck.sh OLD_LATHE NEW_LATHE [FIXTURE_NAME_REGEX]
#   LEVELS="avx2 avx512"  the kernel levels (default: every one `lathe --cpu-kernels` lists)
#   MODES="..."           the modes, as lathe flags joined by '+' (default below)
#   TP=1                  also compare --tp 2 runs (needs mpirun)
set -euo pipefail
old=$1 new=$2 filter=${3:-.}
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/lathe-bitcheck-XXXXXX)
trap 'rm -rf "$work"' EXIT
levels=${LEVELS:-$("$new" --cpu-kernels | sed -n 's/^available: //p')}
modes=${MODES:-"default --dtype+bf16 --reference-kernels --eager --compiled"}
ids='[1, 7, 3, 12, 5, 9, 2, 30, 4, 17, 6, 11]'
fail=0 runs=0 errors=0
for fx in tests/fixtures/tiny/*/; do
  name=$(basename "$fx")
  [[ $name =~ $filter ]] || continue
  "$new" tiny build "$fx" "$work/$name" >/dev/null 2>&1
  for level in $levels; do
    for mode in $modes; do
      flags=()
      [ "$mode" = default ] || IFS=+ read -r -a flags <<<"$mode"
      [ "$mode" = --compiled ] && flags+=(--cache-dir "$work/cache")
      for bin in old new; do
        b=${!bin}
        LATHE_CPU_ISA=$level "$b" logits "$work/$name" --ids "$ids" --hidden-states \
          --out "$work/$bin.safetensors" "${flags[@]}" >/dev/null 2>"$work/$bin.err" ||
          echo "error" >"$work/$bin.safetensors"
        LATHE_CPU_ISA=$level "$b" generate "$work/$name" --prompt-ids '[1, 7, 3]' \
          --max-new-tokens 12 --ignore-eos --json "${flags[@]}" 2>>"$work/$bin.err" |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])' \
            >"$work/$bin.ids" 2>/dev/null || echo "error" >"$work/$bin.ids"
      done
      runs=$((runs + 1))
      if grep -qx error "$work/new.safetensors" "$work/new.ids"; then
        echo "error in $name $level $mode: $(head -c 300 "$work/new.err")" >&2
        errors=$((errors + 1))
      fi
      if ! cmp -s "$work/old.safetensors" "$work/new.safetensors" ||
        ! cmp -s "$work/old.ids" "$work/new.ids"; then
        echo "DIFFERS: $name $level $mode" >&2
        fail=$((fail + 1))
      fi
    done
  done
done
echo "bitcheck: $runs runs, $fail differ ($errors failed with an error, compared as such)"
[ "$fail" -eq 0 ]
