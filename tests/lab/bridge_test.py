#!/usr/bin/env python3
"""The lab's reference bridge (tools/reference/bridge.py) on tiny checkpoints of several
architectures, against the goldens tools/reference/make_tiny.py made for them: for each fixture
the bridge, run on the built checkpoint from the golden's prompt, must produce the golden's 32
greedy tokens and its hidden-state names (OPT's narrower last state, Mamba2's states without the
embedding, Gemma3n's stacked streams, module outputs), and a `lathe lab run` whose reference is that bridge must pass.

Needs a Python with torch and transformers (the reference): ctest registers it only when
LATHE_REFERENCE_PYTHON is configured (`tools/test.sh --reference`).

Usage: bridge_test.py LATHE_BINARY [FIXTURE ...]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BRIDGE = REPO / "tools/reference/bridge.py"
# A plain decoder, OPT with project_out (a narrower last state), a mixture of experts, a hybrid
# linear-attention model, Mamba2 (no embedding state), a multimodal wrapper that
# AutoModelForCausalLM does not map (Llava) and Gemma3n (states of stacked AltUp streams).
FIXTURES = ["llama_tied_gqa", "opt_postnorm_project_nobias", "qwen3_moe_headdim_mlp_only",
            "qwen3_5_dense_interval3_tied", "mamba2_groups", "llava_multimodal_text",
            "gemma3n_text_kv_shared_sparse"]


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stderr[-4000:]}")
    return r


def check(lathe, fixture, tmp):
    golden = json.loads((REPO / "tests/fixtures/tiny" / fixture / "goldens.json").read_text())
    model = tmp / fixture
    run([lathe, "tiny", "build", REPO / "tests/fixtures/tiny" / fixture, model])
    ref = tmp / (fixture + ".ref")
    run([sys.executable, BRIDGE, model, "--prompt-ids", json.dumps(golden["prompt_ids"]),
         "--max-new-tokens", len(golden["greedy_tokens"]), "--out", ref])
    reference = json.loads((ref / "reference.json").read_text())
    problems = []
    for key in ("architecture", "prompt_ids", "greedy_tokens", "hidden_state_names"):
        if reference[key] != golden[key]:
            problems.append(f"{key}: bridge {reference[key]}, goldens {golden[key]}")
    # The lab with this bridge as its reference: a local checkpoint, no golden to read.
    catalog = tmp / (fixture + ".catalog.json")
    catalog.write_text(json.dumps({
        "format": 1, "task": "text-generation", "view": "local", "snapshot": "2026-12-01",
        "models": [{"id": "local/" + fixture, "rank": 1, "path": str(model),
                    "architecture": golden["architecture"], "prompt_ids": golden["prompt_ids"]}]}))
    out = tmp / (fixture + ".lab")
    run([lathe, "lab", "run", "--catalog", catalog, "--out", out, "--quiet", "--no-hf-cache",
         "--reference-python", sys.executable, "--reference-bridge", BRIDGE,
         "--reference-cache", tmp / "reference-cache"])
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines() if line]
    if len(rows) != 1 or rows[0].get("status") != "pass":
        problems.append(f"lab run: {rows}")
    elif "bridge.py" not in rows[0].get("reference_script", ""):
        problems.append(f"lab run: reference_script {rows[0].get('reference_script')!r}")
    return problems


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    lathe = pathlib.Path(sys.argv[1]).resolve()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="lathe-bridge-") as t:
        for fixture in sys.argv[2:] or FIXTURES:
            problems = check(lathe, fixture, pathlib.Path(t))
            print(f"{fixture}: {'ok' if not problems else 'FAILED'}")
            for p in problems:
                print("  " + p)
            failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
