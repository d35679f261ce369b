#!/usr/bin/env python3
"""Builds tiny checkpoints from configs/<name>.json and writes goldens made by transformers.

For each config it writes tests/fixtures/tiny/<name>/:
  config.json, generation_config.json  as given in the spec (the published formats)
  weights.json         the tensor list with (center, scale) per tensor and the seed, from
                       which lathe regenerates the weights bit for bit (weightgen.py)
  goldens.safetensors  teacher-forced logits [T, vocab] and hidden states [states, T, hidden]:
                       embed, each layer's attention and MLP module outputs and its output,
                       final_norm (names in goldens.json; module_outputs.py); and
                       decode_logits [DECODE_ROWS, vocab], generate's raw logits for its first
                       greedy tokens (row 0 after the prompt, row i after greedy token i - 1
                       went through the KV cache)
  goldens.json         ids, 32 greedy tokens with their top-1/top-2 margins, per-layer
                       summaries, and the transformers / torch versions that made them

Usage: make_tiny.py [--only NAME] [--out tests/fixtures/tiny]   (needs torch + transformers)
"""
import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers.pytorch_utils import Conv1D

import module_outputs
import weightgen

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
GOLDEN_FORMAT = 2  # 2: decode_logits
# Rows of decode_logits: the prompt's last position and 7 decode steps, 4 KiB at vocab 128.
DECODE_ROWS = 8


def counter_ids(seed: int, count: int, vocab: int, avoid: set[int]) -> list[int]:
    """Deterministic token ids in [0, vocab) avoiding eos ids."""
    u = weightgen.uniform(seed, "ids", count * 4)
    ids = [int((x + 1) / 2 * vocab) % vocab for x in u]
    return [i for i in ids if i not in avoid][:count]


def build(spec_path: pathlib.Path, out_root: pathlib.Path) -> dict:
    spec = json.loads(spec_path.read_text())
    name = spec_path.stem
    out = out_root / name
    out.mkdir(parents=True, exist_ok=True)
    config = spec["config"]
    gen_config = spec.get("generation_config", {})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(gen_config, indent=2) + "\n")

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "config.json").write_text(json.dumps(config))
        hf_config = transformers.AutoConfig.from_pretrained(tmp)
    model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    model.eval()

    seed = spec["seed"]
    state = model.state_dict()
    tied = getattr(hf_config, "tie_word_embeddings", False)
    # The input embedding by its own name (model.embed_tokens, transformer.wte, ...), and the
    # weights of transformers Conv1D layers, stored [in, out] (GPT-2).
    params = dict(model.named_parameters(remove_duplicate=False))
    embed_name = next(n for n, p in params.items() if p is model.get_input_embeddings().weight
                      and n != "lm_head.weight")
    conv1d = {f"{m}.weight" for m, mod in model.named_modules()
              if isinstance(mod, Conv1D)}
    entries, new_state = [], {}
    for tname, tensor in state.items():
        if tied and tname == "lm_head.weight":
            continue
        shape = list(tensor.shape)
        if not shape:
            # Scalar buffers (XIELUActivation beta, eps) keep the value the model gave them.
            center, scale = float(tensor), 0.0
        else:
            # Conv1D weights are rated by their fan-in, shape[0].
            center, scale = weightgen.init_rule(tname, shape[::-1] if tname in conv1d else shape)
        if tname == embed_name:
            center, scale = weightgen.init_rule("embed_tokens.weight", shape)
            scale = spec.get("embed_scale", scale)
        # "init": {"name suffix": [center, scale]} overrides the rule, e.g. a narrow embedding
        # LayerNorm where embed_scale cannot narrow what the residual stream starts from.
        for suffix, (c, sc) in spec.get("init", {}).items():
            if tname.endswith(suffix):
                center, scale = c, sc
        entries.append({"name": tname, "shape": shape, "center": center, "scale": scale})
        new_state[tname] = torch.from_numpy(weightgen.generate(seed, tname, shape, center, scale))
    missing, unexpected = model.load_state_dict(new_state, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"} and (tied or not missing), missing
    if tied:
        model.tie_weights()
        assert torch.equal(model.lm_head.weight, new_state[embed_name])
    (out / "weights.json").write_text(
        json.dumps({"seed": seed, "generator": "splitmix64-fnv1a-v1", "tensors": entries}, indent=1)
        + "\n")

    vocab = hf_config.vocab_size
    eos = gen_config.get("eos_token_id", [])
    eos = set(eos if isinstance(eos, list) else [eos])
    tf_ids = counter_ids(seed + 1, spec.get("teacher_forced_length", 24), vocab, eos)
    prompt = counter_ids(seed + 2, spec.get("prompt_length", 8), vocab, eos)

    with torch.no_grad():
        with module_outputs.record(model) as inside:
            res = model(torch.tensor([tf_ids]), output_hidden_states=True)
        logits = res.logits[0].float().numpy()
        states = [h[0] for h in res.hidden_states]
        # OPT with project_out: the last hidden state (after project_out) is narrower than
        # the others, and it is left out; final_norm then goes uncompared.
        narrow_last = states[-1].shape != states[0].shape
        if narrow_last:
            states = states[:-1]
        state_names = (["embed"] + [f"layer.{i}.out" for i in range(len(states) - 1)]
                       if narrow_last else
                       ["embed"] + [f"layer.{i}.out" for i in range(len(states) - 2)] + ["final_norm"])
        # Each layer's attention and MLP module outputs, before the layer's own output.
        state_names, states = module_outputs.ordered_states(state_names, states, inside)
        hidden = torch.stack(states).float().numpy()
        # A fresh model for generation, so no state (dynamic rope caches) carries over.
        gen_model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
        gen_model.load_state_dict(model.state_dict())
        gen_model.eval()
        # An explicit all-ones attention mask: otherwise transformers masks prompt tokens
        # equal to the pad id.
        gen = gen_model.generate(
            torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=32, do_sample=False, eos_token_id=sorted(eos) or None,
            pad_token_id=sorted(eos)[0] if eos else None, output_scores=True,
            output_logits=True, return_dict_in_generate=True, use_cache=True)
    new_tokens = gen.sequences[0, len(prompt):].tolist()
    margins = []
    for s in gen.scores:
        top2 = torch.topk(s[0].float(), 2).values
        margins.append(float(top2[0] - top2[1]))
    tf_margins = [float(v[0] - v[1]) for v in torch.topk(torch.from_numpy(logits), 2).values]

    # The logits of decode steps, before any logits processor: a cache fault that moves them
    # without flipping a greedy token shows here.
    decode_logits = torch.stack([x[0].float() for x in gen.logits[:DECODE_ROWS]]).numpy()
    save_file({"logits": logits, "hidden_states": hidden, "decode_logits": decode_logits},
              str(out / "goldens.safetensors"))
    summaries = [{"mean": float(h.mean()), "rms": float(np.sqrt((h.astype(np.float64) ** 2).mean())),
                  "absmax": float(np.abs(h).max())} for h in hidden]
    golden = {
        "format": GOLDEN_FORMAT,
        "architecture": config["architectures"][0],
        "made_by": {"transformers": transformers.__version__, "torch": torch.__version__,
                    "dtype": "float32", "device": "cpu"},
        "teacher_forced_ids": tf_ids,
        "teacher_forced_min_margin": min(tf_margins),
        "prompt_ids": prompt,
        "greedy_tokens": new_tokens,
        "greedy_margins": margins,
        "hidden_state_names": state_names,
        "hidden_state_summaries": summaries,
    }
    (out / "goldens.json").write_text(json.dumps(golden, indent=1) + "\n")
    return {"name": name, "min_greedy_margin": min(margins), "tokens": len(new_tokens),
            "min_tf_margin": min(tf_margins)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="build only this config name")
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/tiny"))
    args = ap.parse_args()
    specs = sorted((HERE / "configs").glob("*.json"))
    if args.only:
        specs = [s for s in specs if s.stem == args.only]
        if not specs:
            print(f"no config named {args.only}", file=sys.stderr)
            return 1
    for spec in specs:
        print(json.dumps(build(spec, pathlib.Path(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
