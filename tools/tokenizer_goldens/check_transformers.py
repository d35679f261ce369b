#!/usr/bin/env python3
"""Reports how the installed transformers' AutoTokenizer compares with the committed goldens
(ids with special tokens, and decode). For the record only: goldens come from `tokenizers`.

  /opt/tok-venv4/bin/python tools/tokenizer_goldens/check_transformers.py   # transformers 4.x
"""
import json
import os

import transformers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
SHARED = os.path.join(ROOT, "..", "shared", "data", "tokenizers")


def main():
    texts = [json.loads(l)["text"] for l in open(os.path.join(FIX, "corpus.jsonl"), encoding="utf-8")]
    meta = json.load(open(os.path.join(FIX, "meta.json")))
    dirs = {n: os.path.join(FIX, n) for n in meta["fixtures"]}
    dirs.update({"real-" + n: os.path.join(SHARED, n) for n in meta["real"]})
    print("transformers", transformers.__version__)
    for name, d in sorted(dirs.items()):
        gold = [json.loads(l) for l in open(os.path.join(FIX, name, "goldens.jsonl"), encoding="utf-8")]
        try:
            a = transformers.AutoTokenizer.from_pretrained(d)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: cannot load ({str(e)[:80]})")
            continue
        enc = dec = n = 0
        first = None
        for g in gold:
            if "i" not in g:
                continue
            n += 1
            ids = a(texts[g["i"]], add_special_tokens=True)["input_ids"]
            if ids == g["ids_special"]:
                enc += 1
            elif first is None:
                first = (texts[g["i"]][:40], ids[:12], g["ids_special"][:12])
            if a.decode(g["ids_special"], skip_special_tokens=False,
                        clean_up_tokenization_spaces=False) == g["text"]:
                dec += 1
        print(f"{name} ({type(a).__name__}): ids {enc}/{n}, decode {dec}/{n}"
              + (f"; first diff {first}" if first else ""))


if __name__ == "__main__":
    main()
