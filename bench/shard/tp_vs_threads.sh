#!/usr/bin/env bash
# Tensor parallelism on this machine's cores against one process using them all as threads:
#   bench/shard/tp_vs_threads.sh MODEL_DIR [TP] [RUNS] [extra lathe bench options...]
# Runs `lathe bench MODEL --tp TP` (TP workers of cores/TP threads) and `lathe bench MODEL
# --threads CORES` alternately RUNS times (default 5), and prints each one's median prefill and
# decode tokens/s, time to first token, load time and peak resident memory (rank 0's, under
# tp), and their ratios (tp / one process). The model's
# heads and kv heads must divide by TP (docs/sharding.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
model="${1:?usage: bench/shard/tp_vs_threads.sh MODEL_DIR [TP] [RUNS] [bench options...]}"
tp="${2:-2}"
runs="${3:-5}"
shift $(($# < 3 ? $# : 3))
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 0; i < runs; i++)); do
  build/lathe bench "$model" --repeat 1 --json --tp "$tp" "$@" >"$out/tp.$i.json"
  build/lathe bench "$model" --repeat 1 --json --threads "$cores" "$@" >"$out/one.$i.json"
done
python3 - "$out" "$runs" "$tp" "$cores" <<'PY'
import json, statistics, sys
out, runs, tp, cores = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def med(kind, key):
    return statistics.median(json.load(open(f"{out}/{kind}.{i}.json"))[key] for i in range(runs))
keys = [("prefill_tokens_per_second", "prefill tok/s"), ("decode_tokens_per_second", "decode tok/s"),
        ("time_to_first_token_seconds", "TTFT s"), ("load_seconds", "load s"),
        ("peak_resident_mib", "peak RSS MiB")]
print(f"{'':16} {'tp ' + tp:>12} {'1 x ' + cores + ' threads':>16} {'ratio':>8}   (medians of {runs})")
for key, label in keys:
    a, b = med("tp", key), med("one", key)
    print(f"{label:16} {a:12.3f} {b:16.3f} {a / b:8.2f}")
PY
