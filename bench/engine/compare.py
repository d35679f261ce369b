#!/usr/bin/env python3
"""End-to-end tokens/s: this lathe against lathe as it was at another commit, same weights.

  python3 bench/engine/compare.py --new build/lathe --model DIR \
      [--old-commit 2efe2e7] [--old-build /tmp/lathe-bench-old] [--runs 5] \
      [--prompt-tokens 128] [--new-tokens 32] [--threads 1,2] [--dtypes f32,bf16]

Builds the old commit's `lathe` outside the tree (a git worktree under --old-build, reused
when present), then for each (dtype, threads) runs both binaries alternately `--runs` times:
`lathe generate MODEL --prompt-ids @FILE --max-new-tokens N --json`, greedy. Prefill tokens/s
is prompt tokens / prefill_seconds; decode tokens/s is what --json reports. Both runs must
generate the same tokens (the same weights and kernels give the same numbers). Prints the
medians and the ratios new / old, and --out writes them as JSON.
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile


def build_old(repo, commit, where):
    binary = os.path.join(where, "build", "lathe")
    if os.path.exists(binary):
        return binary
    if not os.path.exists(where):
        subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", where, commit], check=True)
    venv = os.path.expanduser("~/.cache/lathe/venv/bin/python")
    subprocess.run(["cmake", "-S", where, "-B", os.path.join(where, "build"),
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DLATHE_PYTHON={venv}"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", os.path.join(where, "build"), "--target", "lathe",
                    "-j", str(os.cpu_count() or 2)], check=True, stdout=subprocess.DEVNULL)
    return binary


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run(binary, model, ids_file, new_tokens, threads, dtype):
    cmd = [binary, "generate", model, "--prompt-ids", "@" + ids_file, "--max-new-tokens",
           str(new_tokens), "--greedy", "--json", "--threads", str(threads), "--dtype", dtype]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--new", required=True, help="the lathe binary under test")
    ap.add_argument("--model", required=True, help="checkpoint folder (SmolLM2, tools/smollm2)")
    ap.add_argument("--old-commit", default="2efe2e7")
    ap.add_argument("--old-build", default="/tmp/lathe-bench-old")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    old = build_old(repo, a.old_commit, a.old_build)
    rng = random.Random(7)
    ids = [rng.randrange(100, 40000) for _ in range(a.prompt_tokens)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(ids, f)
        ids_file = f.name

    results = {"cpu": cpu_name(), "cores": os.cpu_count(), "model": a.model,
               "old_commit": a.old_commit, "prompt_tokens": a.prompt_tokens,
               "new_tokens": a.new_tokens, "runs": a.runs, "cases": []}
    print(f"{results['cpu']}, {results['cores']} cores; prompt {a.prompt_tokens} tokens, "
          f"{a.new_tokens} new; medians of {a.runs} alternating runs")
    print(f"{'dtype':6} {'thr':>3} {'prefill new':>12} {'old':>8} {'ratio':>6} "
          f"{'decode new':>11} {'old':>8} {'ratio':>6}")
    for dtype in a.dtypes.split(","):
        for threads in (int(t) for t in a.threads.split(",")):
            samples = {"new": {"prefill": [], "decode": []}, "old": {"prefill": [], "decode": []}}
            tokens = {}
            for i in range(a.runs):
                order = [("new", a.new), ("old", old)] if i % 2 == 0 else [("old", old), ("new", a.new)]
                for name, binary in order:
                    r = run(binary, a.model, ids_file, a.new_tokens, threads, dtype)
                    t = r["timings"]
                    samples[name]["prefill"].append(a.prompt_tokens / t["prefill_seconds"])
                    samples[name]["decode"].append(t["decode_tokens_per_second"])
                    tokens.setdefault(name, r["generated_ids"])
            if tokens["new"] != tokens["old"]:
                sys.exit(f"{dtype}, {threads} threads: the two builds generated different tokens")
            med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in samples.items()}
            case = {"dtype": dtype, "threads": threads, "median": med,
                    "prefill_ratio": med["new"]["prefill"] / med["old"]["prefill"],
                    "decode_ratio": med["new"]["decode"] / med["old"]["decode"]}
            results["cases"].append(case)
            print(f"{dtype:6} {threads:>3} {med['new']['prefill']:>12.1f} {med['old']['prefill']:>8.1f} "
                  f"{case['prefill_ratio']:>6.2f} {med['new']['decode']:>11.1f} "
                  f"{med['old']['decode']:>8.1f} {case['decode_ratio']:>6.2f}")
    os.unlink(ids_file)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
