#!/usr/bin/env python3
"""Goldens for lathe's recurrent kernels, from transformers' own torch functions.

Writes tests/fixtures/recurrent/goldens.json: random inputs (float32, rounded to 6 significant
digits so the JSON holds them exactly as float32 parses them) and what
transformers.models.qwen3_next's torch_chunk_gated_delta_rule (the prompt path, 64-token
chunks), torch_recurrent_gated_delta_rule (the decode path) and causal_conv1d_fn /
causal_conv1d_update return for them, with and without an initial state.

Usage: make_recurrent_goldens.py [--out FILE]   (needs torch + transformers)
"""
import argparse
import json
import pathlib

import torch
import torch.nn.functional as F
import transformers
from transformers.models.qwen3_next import modeling_qwen3_next as m

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def rand(gen, *shape, scale=1.0):
    t = (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale
    return torch.tensor([float(f"{x:.6g}") for x in t.flatten().tolist()],
                        dtype=torch.float32).reshape(shape)


def flat(t):
    return [float(x) for x in t.flatten().tolist()]


def delta_case(gen, name, n, kh, vh, dk, dv, with_state):
    q, k = rand(gen, n, kh, dk), rand(gen, n, kh, dk)
    v = rand(gen, n, vh, dv)
    a, b = rand(gen, n, vh, scale=3), rand(gen, n, vh, scale=3)
    a_log, dt_bias = rand(gen, vh), rand(gen, vh)
    state = rand(gen, vh, dk, dv) if with_state else None
    # Qwen3NextGatedDeltaNet.forward's gates.
    beta = b.sigmoid()
    g = -a_log.float().exp() * F.softplus(a.float() + dt_bias)
    out = {}
    for path, fn in (("chunk", m.torch_chunk_gated_delta_rule),
                     ("recurrent", m.torch_recurrent_gated_delta_rule)):
        o, s = fn(q[None], k[None], v[None], g=g[None], beta=beta[None],
                  initial_state=None if state is None else state[None],
                  output_final_state=True, use_qk_l2norm_in_kernel=True)
        out[path] = {"out": flat(o[0]), "state": flat(s[0])}
    return {"name": name, "n": n, "k_heads": kh, "v_heads": vh, "k_dim": dk, "v_dim": dv,
            "q": flat(q), "k": flat(k), "v": flat(v), "a": flat(a), "b": flat(b),
            "A_log": flat(a_log), "dt_bias": flat(dt_bias),
            "initial_state": None if state is None else flat(state), **out}


def conv_case(gen, name, n, ch, kernel, with_state, bias):
    x = rand(gen, n, ch)
    w = rand(gen, ch, kernel)
    b = rand(gen, ch) if bias else None
    # The state as transformers keeps it: the last `kernel` inputs [ch, kernel] (its oldest
    # column is never read); lathe keeps the last kernel - 1 [kernel - 1, ch].
    state = rand(gen, ch, kernel) if with_state else torch.zeros(ch, kernel)
    if with_state:
        xs = x.t()[None].contiguous()
        conv_state = state[None].clone()
        out = m.causal_conv1d_update(xs, conv_state, w, b, None)[0].t()
        new_state = conv_state[0]
    else:
        out = m.causal_conv1d_fn(x.t()[None].contiguous(), w, b, activation=None)[0].t()
        new_state = F.pad(x.t(), (kernel - n, 0))[:, -kernel:] if n < kernel else x.t()[:, -kernel:]
    return {"name": name, "n": n, "channels": ch, "kernel": kernel, "x": flat(x), "w": flat(w),
            "bias": None if b is None else flat(b),
            "initial_state": flat(state[:, 1:].t()), "out": flat(out),
            "state": flat(new_state[:, 1:].t())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/recurrent/goldens.json"))
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(20261201)
    doc = {
        "made_by": {"transformers": transformers.__version__, "torch": torch.__version__},
        "delta_rule": [
            delta_case(gen, "prompt_two_chunks", 70, 1, 2, 4, 3, False),
            delta_case(gen, "prompt_from_state", 9, 2, 4, 5, 3, True),
            delta_case(gen, "decode_from_state", 1, 2, 2, 6, 4, True),
        ],
        "conv": [
            conv_case(gen, "prompt", 7, 5, 4, False, False),
            conv_case(gen, "prompt_shorter_than_kernel", 2, 3, 4, False, True),
            conv_case(gen, "decode_from_state", 1, 6, 4, True, False),
            conv_case(gen, "decode_from_state_bias", 1, 4, 3, True, True),
        ],
    }
    pathlib.Path(args.out).write_text(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
