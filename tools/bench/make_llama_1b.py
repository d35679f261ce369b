#!/usr/bin/env python3
"""A Llama-3.2-1B-shaped checkpoint with seeded random weights, for benchmarks only.

  python3 tools/bench/make_llama_1b.py --out DIR [--tokenizer-from SMOLLM2_DIR] [--seed 0] [--fp8]

The shape is Llama 3.2 1B's (hidden 2048, 16 layers, MLP 8192, 32 heads, 8 KV heads, tied
embeddings, rope_theta 500000) but with SmolLM2's tokenizer and its 49152-token vocabulary, so
that llama.cpp's converter and lathe both read it as published. Weights are normal(0, 0.02) in
bf16 (about 2.2 GB); nothing here is a trained model, so only speed is meaningful. Needs numpy.
With --fp8 the decoder's projections are stored as a block-scaled FP8 checkpoint, as DeepSeek V3
publishes (quantization_config quant_method "fp8", 128 x 128 blocks: codes e4m3(w / scale),
scale = max |w| / 448 as the weight's "_scale_inv"), the same bf16 weights quantized (about 1.2 GB).
"""
import argparse
import json
import os
import shutil

import numpy as np

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
    "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 64, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "max_position_embeddings": 8192, "tie_word_embeddings": True,
    "vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
    "attention_bias": False, "mlp_bias": False,
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json")


def bf16(rng, shape, scale=0.02):
    x = (rng.standard_normal(shape, dtype=np.float32) * scale).view(np.uint32)
    # Round to nearest even, as torch's .to(bfloat16).
    x = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
    return x.astype(np.uint16)


def e4m3(x):
    """The E4M3 codes nearest to f32 values x (|x| <= 448), ties to even, as torch rounds."""
    bits = x.astype(np.float32).view(np.uint32)
    sign = ((bits >> 24) & 0x80).astype(np.uint8)
    mag = bits & 0x7FFFFFFF
    rounded = mag + 0x7FFFF + ((mag >> 20) & 1)
    normal = ((((rounded >> 23).astype(np.int64) - 120) << 3) | ((rounded >> 20) & 7)).astype(np.int64)
    small = np.rint(mag.view(np.float32) * 512.0).astype(np.int64)  # below 2^-6: steps of 2^-9
    code = np.where(mag < 0x3C800000, small, np.minimum(normal, 0x7E))
    return sign | code.astype(np.uint8)


def fp8_blocks(w_bf16, block=128):
    """A bf16 matrix as block-scaled FP8: (codes uint8, scales f32 [rows / block, cols / block])."""
    w = (w_bf16.astype(np.uint32) << 16).view(np.float32)
    r, c = w.shape
    blocks = w.reshape(r // block, block, c // block, block)
    scale = (np.abs(blocks).max(axis=(1, 3)) / np.float32(448.0)).astype(np.float32)
    codes = e4m3(blocks / scale[:, None, :, None]).reshape(r, c)
    return codes, scale


def write_safetensors(path, tensors):
    """Tensors in the safetensors layout, written directly (safetensors.numpy has no bf16 or FP8
    type), atomically: uint16 arrays are BF16, uint8 F8_E4M3, float32 F32."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    names = {np.dtype(np.uint16): "BF16", np.dtype(np.uint8): "F8_E4M3",
             np.dtype(np.float32): "F32"}
    for k, v in tensors.items():
        header[k] = {"dtype": names[v.dtype], "shape": list(v.shape),
                     "data_offsets": [offset, offset + v.nbytes]}
        offset += v.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little"))
        fh.write(raw)
        for v in tensors.values():
            fh.write(v.tobytes())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-from",
                    default=os.path.expanduser("~/.cache/lathe/smollm2-135m-instruct"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fp8", action="store_true", help="the projections as block-scaled FP8")
    a = ap.parse_args()
    if os.path.exists(os.path.join(a.out, "model.safetensors")):
        print(f"make_llama_1b: {a.out} exists")
        return
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    c = dict(CONFIG)
    if a.fp8:
        c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                    "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    d, f, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    t = {"model.embed_tokens.weight": bf16(rng, (c["vocab_size"], d)),
         "model.norm.weight": np.full(d, 0x3F80, np.uint16)}  # 1.0
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.full(d, 0x3F80, np.uint16)
        t[p + "post_attention_layernorm.weight"] = np.full(d, 0x3F80, np.uint16)
        for name, shape in (("self_attn.q_proj", (q, d)), ("self_attn.k_proj", (kv, d)),
                            ("self_attn.v_proj", (kv, d)), ("self_attn.o_proj", (d, q)),
                            ("mlp.gate_proj", (f, d)), ("mlp.up_proj", (f, d)),
                            ("mlp.down_proj", (d, f))):
            t[p + name + ".weight"] = bf16(rng, shape)
            if a.fp8:
                t[p + name + ".weight"], t[p + name + ".weight_scale_inv"] = fp8_blocks(
                    t[p + name + ".weight"])
    write_safetensors(os.path.join(a.out, "model.safetensors"), t)
    with open(os.path.join(a.out, "config.json"), "w") as fh:
        json.dump(c, fh, indent=2)
    for name in TOKENIZER_FILES:
        src = os.path.join(a.tokenizer_from, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(a.out, name))
    print(f"make_llama_1b: wrote {a.out}")


if __name__ == "__main__":
    main()
