#!/usr/bin/env python3
"""lathe, llama.cpp and transformers side by side on the same weights: prefill and decode
tokens/s, alternating runs, medians, ratios, and decode against the read-bandwidth roofline.

  python3 bench/compare/compare.py --lathe build/lathe --model DIR [--model DIR ...] \\
      --python /opt/ref-venv/bin/python [--work ~/.cache/lathe/bench] [--runs 5] \\
      [--threads 1,2] [--dtypes f32,bf16] [--prompt-tokens 512] [--new-tokens 32] \\
      [--kv-cache default|16bit|f32] [--lathe-compiled] [--cold-files] [--json OUT]

Peers are built and converted outside the repository, under --work:
  - llama.cpp: the copy vendored in PyPI's llama-cpp-python source package (pip download
    --no-binary), built with -DGGML_NATIVE=ON (target llama-bench); or --llama-bench PATH;
  - GGUF files: each model folder converted by that llama.cpp's convert_hf_to_gguf.py
    (--outtype f32 / bf16), run by --python (it needs torch, numpy, sentencepiece); q8_0 and
    q4_0 from the f32 file by its llama-quantize --pure (every matrix of that one type, as
    lathe's --quantize makes them; without --pure llama.cpp would keep the head in Q6_K);
  - lathe with q8_0 / q4_0: `lathe bench --quantize TYPE` on the folder as it is; transformers
    has no such CPU type and is not run for them;
  - transformers: --python's torch and transformers, torch.set_num_threads(threads), the model
    loaded in the dtype, timed on the same prompt after a warm-up forward (prefill: one
    forward; decode: greedy generate of N new tokens minus generate of 1, over N - 1).
The KV cache (--kv-cache): `default` leaves each engine its own (lathe f32, llama.cpp f16,
transformers the model's dtype); `16bit` runs lathe with --kv-dtype bf16 against llama.cpp's
f16, `f32` llama.cpp with -ctk f32 -ctv f32 against lathe's f32, so that both read the same
bytes of cache per token (transformers keeps its own).
Read bandwidth comes from build/bench/kernels/matmul_bench (read_bandwidth*/*, the faster of its
two meters; --bench-binary);
decode's roofline is bandwidth / bytes of weights read per token.
Time to first token (ms): lathe's time_to_first_token_seconds (its prompt's forward steps plus
picking the first token); llama.cpp's and transformers' are the prompt's time from their prefill
rate (prompt tokens / prefill tokens/s), which leaves the picking out, so lathe's column does at
least the same work. The table's last column is lathe's over the faster peer's.
Each round runs lathe (`lathe bench --json`), then llama-bench (-r 1: prefill with -p, then
decode with -n after -d prompt tokens of cache, as lathe's and transformers' decode follow the
prompt; each with flash attention off and on, -fa 0,1, the faster kept), then
transformers, for every model, dtype and thread count. A Llama-3.2-1B-shaped checkpoint with
random weights: tools/bench/make_llama_1b.py.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tarfile

LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"

TRANSFORMERS_RUN = r"""
import json, sys, time, torch, transformers
model_dir, dtype, threads, prompt_tokens, new_tokens = sys.argv[1:6]
torch.set_num_threads(int(threads))
dt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dt)
m.eval()
vocab = m.config.vocab_size
ids = torch.tensor([[(1 + 7919 * i) % vocab for i in range(int(prompt_tokens))]])
with torch.inference_mode():
    m(ids)  # warm-up: oneDNN primitives and allocations are made on the first call
    t0 = time.perf_counter(); m(ids); prefill = time.perf_counter() - t0
    n = int(new_tokens)
    def gen(k):
        t0 = time.perf_counter()
        m.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False)
        return time.perf_counter() - t0
    one, full = gen(1), gen(n)  # decode: the n - 1 steps after the first token
print(json.dumps({"prefill": int(prompt_tokens) / prefill,
                  "decode": (n - 1) / max(full - one, 1e-9)}))
"""


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        # One clear error: the command and the end of what it said (a converter's missing
        # module, a build's failing step), not a Python traceback of this script.
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-12:])
        sys.exit(f"compare: {' '.join(map(str, cmd))} failed (exit {r.returncode}):\n{tail}")
    return r.stdout


def build_llama_cpp(work):
    bench = glob.glob(os.path.join(work, "llama_cpp_python-*/vendor/llama.cpp/build/bin/llama-bench"))
    if bench and os.path.exists(os.path.join(os.path.dirname(bench[0]), "llama-quantize")):
        return bench[0]
    os.makedirs(work, exist_ok=True)
    print(f"compare: downloading and building {LLAMA_CPP_PYTHON} under {work}", file=sys.stderr)
    sh([sys.executable, "-m", "pip", "download", LLAMA_CPP_PYTHON, "--no-binary", ":all:",
        "--no-deps", "-d", work])
    sdist = glob.glob(os.path.join(work, "llama_cpp_python-*.tar.gz"))[0]
    if not glob.glob(os.path.join(work, "llama_cpp_python-*/vendor/llama.cpp")):
        with tarfile.open(sdist) as t:
            t.extractall(work)
    src = glob.glob(os.path.join(work, "llama_cpp_python-*/vendor/llama.cpp"))[0]
    sh(["cmake", "-S", src, "-B", os.path.join(src, "build"), "-DGGML_NATIVE=ON",
        "-DLLAMA_CURL=OFF", "-DCMAKE_BUILD_TYPE=Release"])
    sh(["cmake", "--build", os.path.join(src, "build"), "--target", "llama-bench",
        "llama-quantize", "-j", str(os.cpu_count())])
    return build_llama_cpp(work)


QUANTIZED = {"q8_0": "Q8_0", "q4_0": "Q4_0"}


def gguf_for(work, llama_bench, python, model, dtype):
    out = os.path.join(work, f"{os.path.basename(os.path.normpath(model))}-{dtype}.gguf")
    if dtype in QUANTIZED and not os.path.exists(out):
        f32 = gguf_for(work, llama_bench, python, model, "f32")
        quantize = os.path.join(os.path.dirname(llama_bench), "llama-quantize")
        print(f"compare: quantizing {f32} to {out}", file=sys.stderr)
        sh([quantize, "--pure", f32, out, QUANTIZED[dtype]])
    if not os.path.exists(out):
        src = os.path.dirname(os.path.dirname(os.path.dirname(llama_bench)))
        print(f"compare: converting {model} to {out}", file=sys.stderr)
        sh([python, os.path.join(src, "convert_hf_to_gguf.py"), model, "--outtype", dtype,
            "--outfile", out], env={**os.environ, "PYTHONPATH": os.path.join(src, "gguf-py")})
    return out


# Each engine's KV cache options for --kv-cache.
KV_CACHE = {"default": ([], []), "16bit": (["--kv-dtype", "bf16"], ["-ctk", "f16", "-ctv", "f16"]),
            "f32": (["--kv-dtype", "f32"], ["-ctk", "f32", "-ctv", "f32"])}


def drop_from_page_cache(paths):
    """Drops each file's cached pages (posix_fadvise DONTNEED; pages a process maps stay), so
    that the next engine to read it brings it in its own way: lathe's mapping, which advises
    huge pages, then holds it in 2 MiB folios where the file system allows."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def lathe_run(lathe, model, dtype, threads, prompt, new, kv=()):
    weights = ["--quantize", dtype] if dtype in QUANTIZED else ["--dtype", dtype]
    d = json.loads(sh([lathe, "bench", model, "--prompt-tokens", str(prompt), "--new-tokens",
                       str(new), "--repeat", "1", "--threads", str(threads), *weights, *kv,
                       "--max-seq", str(prompt + new + 8), "--json"]))
    return (d["prefill_tokens_per_second"], d["decode_tokens_per_second"],
            1000 * d["time_to_first_token_seconds"])


def llama_run(bench, gguf, threads, prompt, new, kv=()):
    # Prefill from an empty cache; decode after a prompt's worth of cache (-d), as lathe's and
    # transformers' decode follow the prompt. Each with flash attention off and on (-fa 0,1),
    # the faster kept: which is faster depends on the CPU (on the Intel Xeon of
    # docs/performance-log.md, decode after 512 positions with an f16 cache ran 58.6 tokens/s
    # without and 35.6 with).
    def ts(args):
        rows = json.loads(sh([bench, "-m", gguf, *args, *kv, "-t", str(threads), "-r", "1",
                              "-fa", "0,1", "-o", "json"]))
        return max(r["avg_ts"] for r in rows)
    return (ts(["-p", str(prompt), "-n", "0"]),
            ts(["-p", "0", "-n", str(new), "-d", str(prompt)]))


def prompt_time(prompt, rates):
    """(prefill, decode) tokens/s and the prompt's time in ms from the prefill rate."""
    return (*rates, 1000 * prompt / rates[0])


def transformers_run(python, model, dtype, threads, prompt, new):
    d = json.loads(sh([python, "-c", TRANSFORMERS_RUN, model, dtype, str(threads), str(prompt),
                       str(new)]).strip().splitlines()[-1])
    return d["prefill"], d["decode"]


def read_bandwidth(binary):
    # The faster of the two meters (a plain sum, and 8 row streams as the decode kernels read).
    out = json.loads(sh([binary, "--benchmark_filter=read_bandwidth", "--benchmark_min_time=1",
                         "--benchmark_format=json"]))
    bw = {}
    for b in out["benchmarks"]:
        t = int(b["name"].rsplit("/t", 1)[1].split("/")[0])
        bw[t] = max(bw.get(t, 0.0), b["GB/s"] / 1e9)
    return bw


def weight_bytes(model, dtype):
    cfg = json.load(open(os.path.join(model, "config.json")))
    d, f, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or d // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_layer = d * q * 2 + d * kv * 2 + 3 * d * f
    params = n * per_layer + cfg["vocab_size"] * d  # the head (tied or not) is read once
    return params * {"f32": 4, "bf16": 2, "q8_0": 34 / 32, "q4_0": 18 / 32}[dtype]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--python", required=True, help="a Python with torch and transformers")
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/lathe/bench"))
    ap.add_argument("--llama-bench")
    ap.add_argument("--bench-binary", default="build/bench/kernels/matmul_bench")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--engines", default="lathe,llama.cpp,transformers",
                    help="which to run (the others' columns print nan)")
    ap.add_argument("--kv-cache", choices=sorted(KV_CACHE), default="default",
                    help="KV cache storage of lathe and llama.cpp (see above)")
    ap.add_argument("--lathe-compiled", action="store_true",
                    help="run lathe in its compiled mode (modules cached under --work/compile; "
                    "the first run's warm-up compiles them)")
    ap.add_argument("--lathe-copy-weights", action="store_true",
                    help="run lathe with --copy-weights (the weights copied at load onto 2 MiB "
                    "pages)")
    ap.add_argument("--cold-files", action="store_true",
                    help="drop the checkpoint's and the GGUF file's pages from the page cache "
                         "before each model, dtype and thread count's runs (how the cache holds "
                         "a mapped file moves decode by up to a tenth: docs/performance-log.md)")
    ap.add_argument("--json", help="also write every run here")
    a = ap.parse_args()
    engines = a.engines.split(",")
    llama_bench = a.llama_bench or build_llama_cpp(a.work)
    bw = read_bandwidth(a.bench_binary)
    threads = [int(t) for t in a.threads.split(",")]
    dtypes = a.dtypes.split(",")
    records = []
    print("| model | weights | threads | prefill lathe | llama.cpp | transformers | lathe / best "
          "| decode lathe | llama.cpp | transformers | lathe / llama.cpp | roofline "
          "| first token ms lathe | llama.cpp | transformers | lathe / fastest |")
    print("| --- | --- | ---: |" + " ---: |" * 13)
    for model in a.model:
        for dtype in dtypes:
            gguf = gguf_for(a.work, llama_bench, a.python, model, dtype) \
                if "llama.cpp" in engines else None
            for t in threads:
                runs = {"lathe": [], "llama.cpp": [], "transformers": []}
                if a.cold_files:
                    drop_from_page_cache(glob.glob(os.path.join(model, "*.safetensors"))
                                         + ([gguf] if gguf else []))
                for _ in range(a.runs):
                    if "lathe" in engines:
                        mode = ["--compiled", "--cache-dir", os.path.join(a.work, "compile")] \
                            if a.lathe_compiled else []
                        mode += ["--copy-weights"] if a.lathe_copy_weights else []
                        runs["lathe"].append(lathe_run(a.lathe, model, dtype, t, a.prompt_tokens,
                                                       a.new_tokens,
                                                       [*KV_CACHE[a.kv_cache][0], *mode]))
                    if "llama.cpp" in engines:
                        runs["llama.cpp"].append(prompt_time(a.prompt_tokens, llama_run(
                            llama_bench, gguf, t, a.prompt_tokens, a.new_tokens,
                            KV_CACHE[a.kv_cache][1])))
                    if "transformers" in engines and dtype not in QUANTIZED:
                        runs["transformers"].append(prompt_time(a.prompt_tokens, transformers_run(
                            a.python, model, dtype, t, a.prompt_tokens, a.new_tokens)))
                # Each engine's medians: prefill and decode tokens/s, time to first token (ms).
                med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3))
                       if v else (float("nan"),) * 3 for k, v in runs.items()}
                peers = [v for k, v in med.items() if k != "lathe" and runs[k]]
                best = max(v[0] for v in peers) if peers else float("nan")
                first = min(v[2] for v in peers) if peers else float("nan")
                roof = bw.get(t, bw[max(bw)]) * 1e9 / weight_bytes(model, dtype)
                name = os.path.basename(os.path.normpath(model))
                print(f"| {name} | {dtype} | {t} | {med['lathe'][0]:.1f} | {med['llama.cpp'][0]:.1f}"
                      f" | {med['transformers'][0]:.1f} | {med['lathe'][0] / best:.2f}"
                      f" | {med['lathe'][1]:.1f} | {med['llama.cpp'][1]:.1f}"
                      f" | {med['transformers'][1]:.1f}"
                      f" | {med['lathe'][1] / med['llama.cpp'][1]:.2f}"
                      f" | {med['lathe'][1] / roof:.2f}"
                      f" | {med['lathe'][2]:.0f} | {med['llama.cpp'][2]:.0f}"
                      f" | {med['transformers'][2]:.0f} | {med['lathe'][2] / first:.2f} |",
                      flush=True)
                records.append({"model": model, "dtype": dtype, "threads": t,
                                "kv_cache": a.kv_cache, "runs": runs,
                                "medians": med, "roofline_tokens_per_second": roof})
    print(f"\nread bandwidth (GB/s, matmul_bench): "
          + ", ".join(f"{k} thread{'s' if k > 1 else ''} {v:.1f}" for k, v in sorted(bw.items())))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bandwidth_gb_s": bw, "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
