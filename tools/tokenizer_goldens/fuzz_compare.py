#!/usr/bin/env python3
"""Random-string differential check of a lathe JSON-lines tokenizer front end against the
`tokenizers` package (tokenizer_config.json applied as make_goldens.py does).

  /opt/tok-venv/bin/python tools/tokenizer_goldens/fuzz_compare.py DIR \
      --tokenize "build/src/cli/lathe tokenize" --detokenize "build/src/cli/lathe detokenize" \
      [--seed 5] [--n 1500]

The commands get DIR appended and read / write JSON lines on stdin / stdout.
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import make_goldens as mg  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

POOL = (list(" \t\n\r  abcXYZ019_'-.,!?")
        + list("éÉßİıΣσς東京한글ابגדहि्ेาี่\u0301\u0300\u200d\u200c\u200b\ufeff\u00a0\u3000"
               "😀👍🏽🏳️‍🌈①ﬁ½…€")
        + ["<s>", "</s>", "<mask>", "[NEW]", "<|im_end|>", "<|endoftext|>", "<think>", "[CLS]",
           "<extra>", "<0x41>", "▁", "Ġ", "##", "</w>"])


def run(cmd, d, lines):
    out = subprocess.run(shlex.split(cmd) + [d], input="".join(lines), capture_output=True,
                         text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--tokenize", required=True)
    ap.add_argument("--detokenize", required=True)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--n", type=int, default=1500)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    texts = ["".join(rng.choice(POOL) for _ in range(rng.randint(0, 30))) for _ in range(a.n)]
    cfg_path = os.path.join(a.dir, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    t = mg.apply_config(Tokenizer.from_file(os.path.join(a.dir, "tokenizer.json")), cfg)
    got = run(a.tokenize, a.dir, [json.dumps({"text": s, "add_special_tokens": True}) + "\n"
                                  for s in texts])
    enc_bad = [s for s, g in zip(texts, got) if t.encode(s).ids != g["ids"]]
    reqs = [(t.encode(s).ids, k) for s in texts for k in (False, True)]
    got = run(a.detokenize, a.dir, [json.dumps({"ids": i, "skip_special_tokens": k}) + "\n"
                                    for i, k in reqs])
    dec_bad = [i for (i, k), g in zip(reqs, got) if t.decode(i, skip_special_tokens=k) != g["text"]]
    for s in enc_bad[:3]:
        print("encode differs:", repr(s))
    for i in dec_bad[:3]:
        print("decode differs:", i)
    print(json.dumps({"dir": a.dir, "strings": a.n, "encode_mismatches": len(enc_bad),
                      "decode_mismatches": len(dec_bad)}))
    sys.exit(1 if enc_bad or dec_bad else 0)


if __name__ == "__main__":
    main()
