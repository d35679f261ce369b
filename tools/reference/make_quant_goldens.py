#!/usr/bin/env python3
"""Writes tests/fixtures/quant/gguf.json: what the GGUF reference quantizers (the `gguf`
package's numpy Q8_0 and Q4_0, which mirror ggml's quantize_row_q8_0_ref / _q4_0_ref) make of a
few rows, the reference for lathe's quantization (tests/core/quant_test.cpp): the codes and
scales must equal theirs, so a model quantized by lathe holds the numbers llama.cpp's
llama-quantize would give it.

The rows: Gaussian values at several scales, a row of zeros, rows whose values fall on exact
half steps of the scale (ties: Q8_0 rounds them away from zero, Q4_0 up), a block whose
largest magnitude is negative, and tiny and large magnitudes (f16 scale subnormals and
overflow are not exercised: weights are far from both). Values and dequantized results are
stored as f32 bits.

Usage: make_quant_goldens.py [--out tests/fixtures/quant/gguf.json]   (needs numpy and gguf)
"""
import argparse
import importlib.metadata
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType, quants

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def rows() -> np.ndarray:
    rng = np.random.default_rng(20261202)
    out = [rng.standard_normal(128) * s for s in (1.0, 0.02, 30.0)]
    out.append(np.zeros(128))
    # Half steps: block maxima 127 (Q8_0 scale 1) and -8 (Q4_0 scale 1), then k + 0.5 values.
    ties = np.concatenate([[127.0], np.arange(-15, 16) + 0.5, [-8.0], np.arange(-8, 7) + 0.5,
                           np.arange(-8, 8) * 0.25, np.linspace(-8, 7, 32) * 0.999,
                           [-127.0], -np.arange(31) - 0.5])
    out.append(ties[:128])
    neg = rng.standard_normal(128)
    neg[5] = -9.0  # block 0's largest magnitude, negative
    neg[70] = -4.0
    out.append(neg)
    out.append(rng.standard_normal(128) * 1e-4)
    return np.stack(out).astype(np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/quant/gguf.json"))
    args = ap.parse_args()
    x = rows()
    out = {"made_by": {"gguf": importlib.metadata.version("gguf"), "numpy": np.__version__,
                       "functions": "gguf.quants.quantize / dequantize"},
           "shape": list(x.shape), "input_bits": x.view(np.uint32).reshape(-1).tolist()}
    for name, t in (("q8_0", GGMLQuantizationType.Q8_0), ("q4_0", GGMLQuantizationType.Q4_0)):
        deq = quants.dequantize(quants.quantize(x, t), t).astype(np.float32)
        assert deq.shape == x.shape
        out[name + "_bits"] = deq.view(np.uint32).reshape(-1).tolist()
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
