#!/usr/bin/env python3
"""Goldens for lathe's Mamba2 selective scan (graph Op::Ssd), from transformers' own torch paths.

Writes tests/fixtures/recurrent/ssd.json: random inputs (float32, rounded to 6 significant digits
so the JSON holds them exactly as float32 parses them) and what
transformers.models.mamba2's mamba2_chunk_scan (Mamba2Mixer's prompt path, here in 16-token
chunks so that 70 tokens cross chunk boundaries) and mamba2_selective_state_update (its decode
path, called once per token) return for them: the output (with the D skip, before the gated
norm) and the final state, with and without an initial state, one group and several, and a
time_step_limit that clamps dt (the prompt path only: the decode path does not clamp).

Usage: make_ssd_goldens.py [--out FILE]   (needs torch + transformers)
"""
import argparse
import json
import pathlib

import torch
import transformers
from transformers.models.mamba2 import modeling_mamba2 as m

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
CHUNK = 16


def rand(gen, *shape, scale=1.0):
    t = (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale
    return torch.tensor([float(f"{x:.6g}") for x in t.flatten().tolist()],
                        dtype=torch.float32).reshape(shape)


def flat(t):
    return [float(x) for x in t.flatten().tolist()]


def chunk_path(x, dt, a_log, dt_bias, b, c, d, state, dt_limit):
    # Mamba2Mixer.forward's chunk form: A = -exp(A_log), softplus and clamp inside.
    out, final = m.mamba2_chunk_scan(
        x[None], dt[None], -torch.exp(a_log.float()), b[None], c[None], chunk_size=CHUNK, D=d,
        dt_bias=dt_bias, dt_softplus=True, dt_limit=dt_limit, return_final_states=True,
        initial_states=None if state is None else state[None])
    return out[0], final[0]


def recurrent_path(x, dt, a_log, dt_bias, b, c, d, state):
    # Mamba2Mixer.forward's recurrent form, one token at a time, with its expanded arguments.
    n, heads, head_dim = x.shape
    d_state = b.shape[-1]
    s = (torch.zeros(heads, head_dim, d_state) if state is None else state.clone())[None]
    A = -torch.exp(a_log.float())[:, None, None].expand(-1, head_dim, d_state)
    outs = []
    for t in range(n):
        outs.append(m.mamba2_selective_state_update(
            s, x[t][None], dt[t][None, :, None].expand(-1, -1, head_dim), A, b[t][None],
            c[t][None], d[:, None].expand(-1, head_dim), z=None,
            dt_bias=dt_bias[:, None].expand(-1, head_dim), dt_softplus=True)[0])
    return torch.stack(outs), s[0]


def ssd_case(gen, name, n, heads, head_dim, groups, d_state, with_state, dt_limit=None):
    x = rand(gen, n, heads, head_dim)
    dt = rand(gen, n, heads, scale=3)
    a_log, dt_bias = rand(gen, heads), rand(gen, heads)
    b, c = rand(gen, n, groups, d_state), rand(gen, n, groups, d_state)
    d = rand(gen, heads)
    state = rand(gen, heads, head_dim, d_state) if with_state else None
    limit = dt_limit or (0.0, float("inf"))
    out = {}
    o, s = chunk_path(x, dt, a_log, dt_bias, b, c, d, state, limit)
    out["chunk"] = {"out": flat(o), "state": flat(s)}
    if dt_limit is None:
        o, s = recurrent_path(x, dt, a_log, dt_bias, b, c, d, state)
        out["recurrent"] = {"out": flat(o), "state": flat(s)}
    return {"name": name, "n": n, "heads": heads, "head_dim": head_dim, "groups": groups,
            "d_state": d_state, "dt_min": limit[0], "dt_max": limit[1] if limit[1] < 1e30 else None,
            "x": flat(x), "dt": flat(dt), "A_log": flat(a_log), "dt_bias": flat(dt_bias),
            "B": flat(b), "C": flat(c), "D": flat(d),
            "initial_state": None if state is None else flat(state), **out}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/recurrent/ssd.json"))
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(20261202)
    doc = {
        "made_by": {"transformers": transformers.__version__, "torch": torch.__version__},
        "chunk_size": CHUNK,
        "ssd": [
            ssd_case(gen, "prompt_five_chunks", 70, 4, 3, 2, 5, False),
            ssd_case(gen, "prompt_from_state", 21, 3, 4, 1, 6, True),
            ssd_case(gen, "prompt_clamped_dt", 19, 4, 2, 4, 3, True, dt_limit=(0.05, 0.8)),
            ssd_case(gen, "decode_from_state", 1, 6, 4, 3, 8, True),
        ],
    }
    pathlib.Path(args.out).write_text(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
