#!/usr/bin/env python3
"""A Qwen3.5-shaped checkpoint with random weights, for benchmarks of the hybrid decoder.

Qwen3_5ForCausalLM, hidden 1024, 12 layers (9 Gated DeltaNet, 3 gated full attention: the
config's default full_attention_interval 4), 16 key and 16 value linear-attention heads of 128,
8 query heads and 2 KV heads of 256 for full attention, intermediate 3072, tied embeddings, f32
(280M parameters, 1.1 GB). transformers writes it (save_pretrained); SmolLM2's tokenizer files
are copied beside it (its 49152-token vocabulary is the model's) so that llama.cpp's
convert_hf_to_gguf.py can convert it (with --no-mtp: the model has no multi-token prediction
layers).

Usage: make_qwen35.py --out DIR [--tokenizer-from SMOLLM2_DIR]   (needs torch + transformers)
"""
import argparse
import os
import pathlib
import shutil

import torch
import transformers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-from", default=os.environ.get("LATHE_SMOLLM2_DIR"),
                    help="a folder with tokenizer.json (default: $LATHE_SMOLLM2_DIR)")
    args = ap.parse_args()
    cfg = transformers.Qwen3_5TextConfig(
        vocab_size=49152, hidden_size=1024, intermediate_size=3072, num_hidden_layers=12,
        num_attention_heads=8, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
        linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
        max_position_embeddings=4096, tie_word_embeddings=True)
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    out = pathlib.Path(args.out)
    model.save_pretrained(out)
    if args.tokenizer_from:
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            src = pathlib.Path(args.tokenizer_from) / name
            if src.exists():
                shutil.copy(src, out / name)
    print(f"{out}: {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
