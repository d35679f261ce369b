#!/usr/bin/env python3
"""lathe against llama.cpp on the same weights: prefill and decode tokens/s, alternating runs.

  python3 bench/engine/vs_llama_cpp.py --lathe build/lathe --model HF_DIR \
      --llama-bench LLAMA_CPP/build/bin/llama-bench --gguf-f32 F32.gguf --gguf-bf16 BF16.gguf \
      [--runs 3] [--prompt-tokens 128] [--new-tokens 32] [--threads 1,2]

llama.cpp is built outside the tree from the llama-cpp-python source package (its vendored
llama.cpp), and the GGUF files are made from the same checkpoint folder by its own
convert_hf_to_gguf.py (--outtype f32 / bf16). Each round runs lathe (`generate --json`, a
random 128-token prompt, greedy) then `llama-bench -p N -n M -r 1`, for every dtype and thread
count; prints medians and the ratios lathe / llama.cpp.
"""
import argparse
import json
import random
import statistics
import subprocess
import tempfile


def lathe_run(binary, model, ids_file, new_tokens, threads, dtype, prompt_tokens):
    out = subprocess.run([binary, "generate", model, "--prompt-ids", "@" + ids_file,
                          "--max-new-tokens", str(new_tokens), "--greedy", "--json", "--threads",
                          str(threads), "--dtype", dtype], check=True, capture_output=True,
                         text=True).stdout
    t = json.loads(out)["timings"]
    return prompt_tokens / t["prefill_seconds"], t["decode_tokens_per_second"]


def llama_run(bench, gguf, prompt_tokens, new_tokens, threads):
    out = subprocess.run([bench, "-m", gguf, "-p", str(prompt_tokens), "-n", str(new_tokens),
                          "-t", str(threads), "-r", "1", "-o", "json"], check=True,
                         capture_output=True, text=True).stdout
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0)
    return pp, tg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--gguf-f32", required=True)
    ap.add_argument("--gguf-bf16", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    rng = random.Random(7)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([rng.randrange(100, 40000) for _ in range(a.prompt_tokens)], f)
        ids_file = f.name
    print(f"{'dtype':6} {'thr':>3} {'prefill lathe':>14} {'llama.cpp':>10} {'ratio':>6} "
          f"{'decode lathe':>13} {'llama.cpp':>10} {'ratio':>6}")
    for dtype, gguf in (("f32", a.gguf_f32), ("bf16", a.gguf_bf16)):
        for threads in (int(t) for t in a.threads.split(",")):
            lp, ld, cp, cd = [], [], [], []
            for _ in range(a.runs):
                p, d = lathe_run(a.lathe, a.model, ids_file, a.new_tokens, threads, dtype,
                                 a.prompt_tokens)
                lp.append(p), ld.append(d)
                p, d = llama_run(a.llama_bench, gguf, a.prompt_tokens, a.new_tokens, threads)
                cp.append(p), cd.append(d)
            m = [statistics.median(v) for v in (lp, cp, ld, cd)]
            print(f"{dtype:6} {threads:>3} {m[0]:>14.1f} {m[1]:>10.1f} {m[0] / m[1]:>6.2f} "
                  f"{m[2]:>13.1f} {m[3]:>10.1f} {m[2] / m[3]:>6.2f}")


if __name__ == "__main__":
    main()
