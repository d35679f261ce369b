#!/usr/bin/env python3
"""A gpt-oss-shaped checkpoint whose MXFP4 experts dwarf the rest, for benchmarks only.

  python3 tools/bench/make_gpt_oss_mxfp4.py --out DIR [--seed 0]

GptOssForCausalLM with quantization_config quant_method "mxfp4" as the published gpt-oss
checkpoints have it: 4 layers of 32 experts (4 routed per token) of hidden and intermediate
size 1024, the experts as U8 blocks and scales (gate_up_proj_blocks [32, 2048, 32, 16],
down_proj_blocks [32, 1024, 32, 16], random codes, scales 2^-6 .. 2^-3), everything else bf16
normal(0, 0.02): 100.7 M expert values a layer, 214 MB as MXFP4 (lathe's repacked copy: 17
bytes per 32 values), 805 MB dequantized to bf16, 1.61 GB to f32. Nothing here is a trained
model, so only speed and memory are meaningful. Needs numpy (no torch); no tokenizer (lathe
bench makes its prompt from token ids).
"""
import argparse
import json
import os

import numpy as np

LAYERS, EXPERTS, HIDDEN, INTER = 4, 32, 1024, 1024
CONFIG = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 4096,
    "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
    "num_local_experts": EXPERTS, "num_experts_per_tok": 4, "sliding_window": 128,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "quantization_config": {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"]},
}


def bf16(rng, shape, scale=0.02):
    x = (rng.standard_normal(shape, dtype=np.float32) * scale).view(np.uint32)
    x = (x + 0x7FFF + ((x >> 16) & 1)) >> 16  # round to nearest even, as torch's .to(bfloat16)
    return ("BF16", x.astype(np.uint16))


def tensors(rng):
    d, hd = HIDDEN, CONFIG["head_dim"]
    q, kv = CONFIG["num_attention_heads"] * hd, CONFIG["num_key_value_heads"] * hd
    one = lambda n: ("BF16", np.full(n, 0x3F80, np.uint16))  # 1.0 in bf16
    t = {"model.embed_tokens.weight": bf16(rng, (CONFIG["vocab_size"], d)),
         "model.norm.weight": one(d), "lm_head.weight": bf16(rng, (CONFIG["vocab_size"], d))}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = one(d)
        t[p + "post_attention_layernorm.weight"] = one(d)
        for name, shape in (("q_proj", (q, d)), ("k_proj", (kv, d)), ("v_proj", (kv, d)),
                            ("o_proj", (d, q))):
            t[p + "self_attn." + name + ".weight"] = bf16(rng, shape)
            t[p + "self_attn." + name + ".bias"] = bf16(rng, shape[:1])
        t[p + "self_attn.sinks"] = bf16(rng, (CONFIG["num_attention_heads"],), 1.0)
        t[p + "mlp.router.weight"] = bf16(rng, (EXPERTS, d))
        t[p + "mlp.router.bias"] = bf16(rng, (EXPERTS,))
        x = p + "mlp.experts."
        for name, rows, cols in (("gate_up_proj", 2 * INTER, d), ("down_proj", d, INTER)):
            t[x + name + "_blocks"] = ("U8", rng.integers(0, 256, (EXPERTS, rows, cols // 32, 16),
                                                          dtype=np.uint8))
            t[x + name + "_scales"] = ("U8", rng.integers(121, 125, (EXPERTS, rows, cols // 32),
                                                          dtype=np.uint8))
        t[x + "gate_up_proj_bias"] = bf16(rng, (EXPERTS, 2 * INTER))
        t[x + "down_proj_bias"] = bf16(rng, (EXPERTS, d))
    return t


def write_safetensors(path, tensors):
    """(dtype, array) tensors in the safetensors layout, written directly, atomically."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for k, (dtype, v) in tensors.items():
        header[k] = {"dtype": dtype, "shape": list(v.shape),
                     "data_offsets": [offset, offset + v.nbytes]}
        offset += v.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little"))
        fh.write(raw)
        for _, v in tensors.values():
            fh.write(v.tobytes())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"),
                      tensors(np.random.default_rng(a.seed)))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=1)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2]}, f)
    print(f"make_gpt_oss_mxfp4: wrote {a.out}")


if __name__ == "__main__":
    main()
