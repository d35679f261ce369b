#!/usr/bin/env python3
"""The lab's reference: runs a checkpoint folder with transformers f32 on CPU.

Generates MAX_NEW_TOKENS greedy tokens from the given prompt ids, then computes the
teacher-forced logits and hidden states of prompt + generated tokens, and writes them in the
golden format lathe reads (the format tools/reference/make_tiny.py writes for fixtures):

  OUT/reference.json         versions, prompt ids, greedy tokens and margins, ids, layer names
  OUT/reference.safetensors  logits [T, vocab] and hidden_states [states, T, hidden]: embed,
                             each layer's attention and MLP module outputs and its output,
                             final_norm (module_outputs.py)

Usage: bridge.py MODEL_DIR --prompt-ids '[1, 2, 3]' [--max-new-tokens 32] --out OUT
Needs torch and transformers; the lab runs it when they are installed and caches its output.
"""
import argparse
import json
import pathlib
import shlex
import sys

FORMAT = 2  # 2: decode_logits
DECODE_ROWS = 8  # as make_tiny.py


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--prompt-ids", required=True, help="JSON list of token ids")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import numpy as np
    import torch

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import module_outputs
    import transformers
    from safetensors.numpy import save_file

    prompt = json.loads(args.prompt_ids)
    if not isinstance(prompt, list) or not prompt or not all(isinstance(i, int) for i in prompt):
        print("bridge: --prompt-ids must be a non-empty JSON list of token ids", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
    except ValueError:
        # Multimodal checkpoints AutoModelForCausalLM does not map (Llava, Qwen2-VL, Mistral3):
        # their wrapper, run on text alone.
        model = transformers.AutoModelForImageTextToText.from_pretrained(args.model_dir,
                                                                         dtype=torch.float32)
    model.eval()
    gen_config = model.generation_config
    eos = gen_config.eos_token_id
    eos = sorted(set(eos if isinstance(eos, list) else ([eos] if eos is not None else [])))
    with torch.no_grad():
        # An explicit all-ones mask: otherwise prompt tokens equal to the pad id are masked.
        gen = model.generate(
            torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=args.max_new_tokens, do_sample=False, num_beams=1,
            eos_token_id=eos or None, pad_token_id=eos[0] if eos else None,
            output_scores=True, output_logits=True, return_dict_in_generate=True, use_cache=True)
        tokens = gen.sequences[0, len(prompt):].tolist()
        margins = [float(v[0] - v[1]) for v in (torch.topk(s[0].float(), 2).values for s in gen.scores)]
        ids = prompt + tokens
        with module_outputs.record(model) as inside:
            res = model(torch.tensor([ids]), output_hidden_states=True)
        logits = res.logits[0].float().numpy()
        arch = (model.config.architectures or [type(model).__name__])[0]
        states = [module_outputs.batch_row(h, arch) for h in res.hidden_states]
        names, states = module_outputs.state_names(arch, states)
        names, states = module_outputs.ordered_states(names, states, inside)
        hidden = torch.stack(states).float().numpy()

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    decode_logits = torch.stack([x[0].float() for x in gen.logits[:DECODE_ROWS]]).numpy()
    save_file({"logits": np.ascontiguousarray(logits), "hidden_states": np.ascontiguousarray(hidden),
               "decode_logits": np.ascontiguousarray(decode_logits)},
              str(out / "reference.safetensors"))
    script = " ".join(shlex.quote(a) for a in
                      ["python", "tools/reference/bridge.py", args.model_dir, "--prompt-ids",
                       json.dumps(prompt), "--max-new-tokens", str(args.max_new_tokens),
                       "--out", "REFERENCE_DIR"])
    reference = {
        "format": FORMAT,
        "architecture": (model.config.architectures or [type(model).__name__])[0],
        "made_by": {"transformers": transformers.__version__, "torch": torch.__version__,
                    "dtype": "float32", "device": "cpu"},
        "teacher_forced_ids": ids,
        "prompt_ids": prompt,
        "greedy_tokens": tokens,
        "greedy_margins": margins,
        "hidden_state_names": names,
        "script": script,
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
