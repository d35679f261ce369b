#!/usr/bin/env python3
"""Single-thread encode throughput: lathe vs the `tokenizers` package on the same text.

  /opt/tok-venv/bin/python bench/tokenizer/compare.py --lathe BUILD/bench/tokenizer/tokenizer_bench \
      --tokenizer DIR [--mb 10] [--runs 5]

Generates ~MB megabytes of multilingual text (seeded; documents of ~4 KB built from the
conformance corpus), times `tokenizers` (encode_batch with RAYON_NUM_THREADS=1, so one thread)
and the lathe program, checks both produce the same token count, and prints the medians and
the ratio.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "tokenizer_goldens"))
import corpus  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def make_docs(mb, seed=99):
    rng = random.Random(seed)
    lines = [s for s in corpus.build() if s]
    docs, total = [], 0
    while total < mb * 1_000_000:
        parts, size = [], 0
        while size < 4000:
            s = rng.choice(lines)
            parts.append(s)
            size += len(s.encode())
        d = "\n".join(parts)
        docs.append(d)
        total += len(d.encode())
    return docs, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    docs, total = make_docs(a.mb)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
        path = f.name
    tok = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    times, ntok = [], 0
    for _ in range(a.runs):
        t0 = time.perf_counter()
        encs = tok.encode_batch(docs, add_special_tokens=False)
        times.append(time.perf_counter() - t0)
        ntok = sum(len(e.ids) for e in encs)
    hf = statistics.median(times)
    out = subprocess.run([a.lathe, a.tokenizer, path, str(a.runs)], check=True,
                         capture_output=True, text=True).stdout
    lathe = json.loads(out)
    os.unlink(path)
    print(json.dumps({"tokenizer": a.tokenizer, "bytes": total, "docs": len(docs),
                      "tokenizers_median_s": round(hf, 4),
                      "tokenizers_mb_per_s": round(total / 1e6 / hf, 2),
                      "lathe_median_s": round(lathe["median_s"], 4),
                      "lathe_mb_per_s": round(lathe["mb_per_s"], 2),
                      "speed_ratio_lathe_over_tokenizers": round(hf / lathe["median_s"], 3),
                      "same_token_count": lathe["tokens"] == ntok}))


if __name__ == "__main__":
    main()
