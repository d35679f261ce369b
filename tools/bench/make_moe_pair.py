#!/usr/bin/env python3
"""A mixture of experts and the dense model of the same active size, for benchmarks only.

  python3 tools/bench/make_moe_pair.py --out DIR [--tokenizer-from SMOLLM2_DIR] [--seed 0]

Writes DIR/moe (MixtralForCausalLM: 32 experts of intermediate size 512, 4 routed per token)
and DIR/dense (LlamaForCausalLM with intermediate size 2048 = 4 x 512), otherwise alike:
hidden 1024, 8 layers, 16 heads, 4 KV heads, SmolLM2's tokenizer and vocabulary, bf16
weights normal(0, 0.02). A decode step of either reads the same MLP bytes per layer; the MoE
holds 8x the expert weights (0.8 GB). Nothing here is trained: only speed and memory mean
anything. Needs numpy.
"""
import argparse
import json
import os
import shutil

import numpy as np

from make_llama_1b import TOKENIZER_FILES, bf16, write_safetensors

COMMON = {
    "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 64, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "max_position_embeddings": 4096, "tie_word_embeddings": True,
    "vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
}
MOE = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
       "intermediate_size": 512, "num_local_experts": 32, "num_experts_per_tok": 4, **COMMON}
DENSE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
         "intermediate_size": 2048, "attention_bias": False, "mlp_bias": False, **COMMON}


def tensors(rng, c, moe):
    d, hd = c["hidden_size"], c["head_dim"]
    q, kv, f = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd, c["intermediate_size"]
    one = lambda n: np.full(n, 0x3F80, np.uint16)  # 1.0 in bf16
    t = {"model.embed_tokens.weight": bf16(rng, (c["vocab_size"], d)), "model.norm.weight": one(d)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = one(d)
        t[p + "post_attention_layernorm.weight"] = one(d)
        for name, shape in (("q_proj", (q, d)), ("k_proj", (kv, d)), ("v_proj", (kv, d)),
                            ("o_proj", (d, q))):
            t[p + "self_attn." + name + ".weight"] = bf16(rng, shape)
        if moe:
            t[p + "block_sparse_moe.gate.weight"] = bf16(rng, (c["num_local_experts"], d))
            for e in range(c["num_local_experts"]):
                x = f"{p}block_sparse_moe.experts.{e}."
                t[x + "w1.weight"] = bf16(rng, (f, d))
                t[x + "w3.weight"] = bf16(rng, (f, d))
                t[x + "w2.weight"] = bf16(rng, (d, f))
        else:
            t[p + "mlp.gate_proj.weight"] = bf16(rng, (f, d))
            t[p + "mlp.up_proj.weight"] = bf16(rng, (f, d))
            t[p + "mlp.down_proj.weight"] = bf16(rng, (d, f))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-from",
                    default=os.path.expanduser("~/.cache/lathe/smollm2-135m-instruct"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for name, config in (("moe", MOE), ("dense", DENSE)):
        out = os.path.join(a.out, name)
        if os.path.exists(os.path.join(out, "model.safetensors")):
            print(f"make_moe_pair: {out} exists")
            continue
        os.makedirs(out, exist_ok=True)
        rng = np.random.default_rng(a.seed)
        write_safetensors(os.path.join(out, "model.safetensors"), tensors(rng, config, name == "moe"))
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
        for fname in TOKENIZER_FILES:
            src = os.path.join(a.tokenizer_from, fname)
            if os.path.exists(src):
                shutil.copy(src, out)
        print(f"make_moe_pair: wrote {out}")


if __name__ == "__main__":
    main()
