#!/usr/bin/env python3
"""Writes tests/fixtures/mxfp4/dequantize.json: what transformers' own MXFP4 dequantization
(integrations/mxfp4.py convert_moe_packed_tensors, the function GptOss checkpoints with
quantization_config quant_method "mxfp4" are loaded through when they are dequantized) makes of
a few blocks and scales, the reference for lathe's dequantize_mxfp4 (tests/models/mxfp4_test.cpp).

The blocks hold every byte value once (so every pair of FP4 codes, low and high nibble), and
the scales run over the E8M0 range: 0 (2^-127, a subnormal step), 1, values near 127, 254 and
255 (2^128: inf, and NaN for the zero codes). Dequantized values are stored as their bits,
f32 and bf16, in the layout before transformers' final transpose(1, 2): [experts, rows,
groups * 32].

Usage: make_mxfp4_goldens.py [--out tests/fixtures/mxfp4/dequantize.json]   (needs torch +
transformers)
"""
import argparse
import json
import pathlib

import numpy as np
import torch
import transformers
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/mxfp4/dequantize.json"))
    args = ap.parse_args()
    experts, rows, groups = 2, 4, 2
    blocks = np.random.RandomState(7).permutation(256).astype(np.uint8).reshape(experts, rows, groups, 16)
    scales = np.array([0, 1, 2, 60, 100, 120, 126, 127, 128, 129, 133, 140, 200, 253, 254, 255],
                      dtype=np.uint8).reshape(experts, rows, groups)
    out = {"made_by": {"transformers": transformers.__version__, "torch": torch.__version__,
                       "function": "transformers.integrations.mxfp4.convert_moe_packed_tensors"},
           "blocks_shape": list(blocks.shape), "blocks": blocks.reshape(-1).tolist(),
           "scales_shape": list(scales.shape), "scales": scales.reshape(-1).tolist(),
           "shape": [experts, rows, groups * 32]}
    for tag, dtype, view in (("f32_bits", torch.float32, torch.int32), ("bf16_bits", torch.bfloat16, torch.int16)):
        deq = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales), dtype=dtype)
        assert list(deq.shape) == [experts, groups * 32, rows], deq.shape
        bits = deq.transpose(1, 2).contiguous().view(view).reshape(-1).numpy()
        mask = (1 << (32 if dtype == torch.float32 else 16)) - 1
        out[tag] = [int(b) & mask for b in bits]
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
