#!/usr/bin/env python3
"""Goldens for which special tokens transformers 5.x adds around a text, per tokenizer and
tokenizer_config.json (tests/tokenizer/specials_test.cpp; rules in docs/tokenizer.md).

For every tokenizer.json of tests/fixtures/tokenizers and ../shared/data/tokenizers it loads
`AutoTokenizer` on that file beside a few tokenizer_config.json variants (the committed one,
the DeepSeek-V3 shape: LlamaTokenizerFast with add_bos_token, add_bos + add_eos on a generic
class, CodeLlama, GPT-NeoX) and records the ids added before and after the text
(`add_special_tokens=True` minus `False`). Only the added ids are compared: transformers 5
rebuilds some classes' pipelines (docs/tokenizer.md), the text's own ids come from `tokenizers`.

  /opt/ref-venv/bin/python tools/tokenizer_goldens/special_goldens.py
"""
import argparse
import json
import os
import tempfile

import transformers
from transformers import AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
TEXTS = ["Hello world", "The quick brown fox.\n"]


def token_name(v):
    return v["content"] if isinstance(v, dict) else v


def pick(tok_json, cfg, key, fallback_index):
    """A token for bos/eos that the vocabulary holds: the config's, else a special added token."""
    vocab = tok_json["model"].get("vocab")
    names = set(vocab) if isinstance(vocab, dict) else {v[0] if isinstance(v, list) else v
                                                         for v in (vocab or [])}
    added = [a["content"] for a in tok_json.get("added_tokens", []) if a.get("special")]
    names |= set(added)
    name = token_name(cfg.get(key))
    if name in names:
        return name
    if added:
        return added[min(fallback_index, len(added) - 1)]
    return None


def variants(tok_json, cfg):
    bos, eos = pick(tok_json, cfg, "bos_token", 0), pick(tok_json, cfg, "eos_token", 1)
    base = {k: v for k, v in cfg.items() if k not in ("add_bos_token", "add_eos_token")}
    out = {"committed": cfg}
    if bos is None:
        return out
    tokens = {"bos_token": bos, "eos_token": eos}
    out["llama-fast-add-bos"] = {**base, **tokens, "tokenizer_class": "LlamaTokenizerFast",
                                 "add_bos_token": True, "add_eos_token": False}
    out["add-bos-eos"] = {**base, **tokens, "tokenizer_class": "PreTrainedTokenizerFast",
                          "add_bos_token": True, "add_eos_token": True}
    out["code-llama"] = {**base, **tokens, "tokenizer_class": "CodeLlamaTokenizerFast",
                         "add_bos_token": False, "add_eos_token": True}
    out["gpt-neox"] = {**base, **tokens, "tokenizer_class": "GPTNeoXTokenizerFast",
                       "add_bos_token": True, "add_eos_token": True}
    return out


def added_ids(a, text):
    plain = a(text, add_special_tokens=False)["input_ids"]
    full = a(text, add_special_tokens=True)["input_ids"]
    for k in range(len(full) - len(plain) + 1):
        if full[k:k + len(plain)] == plain:
            return full[:k], full[k + len(plain):]
    raise RuntimeError(f"{text!r}: {plain} is not inside {full}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "data", "tokenizers"))
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    meta = json.load(open(os.path.join(FIX, "meta.json")))
    sources = [(n, os.path.join(FIX, n)) for n in sorted(meta["fixtures"])]
    sources += [("real-" + n, os.path.join(args.shared, n)) for n in sorted(meta["real"])]
    cases = []
    for name, d in sources:
        path = os.path.join(d, "tokenizer.json")
        if not os.path.exists(path):
            print("skipping", name, "(", path, "missing )")
            continue
        tok_json = json.load(open(path, encoding="utf-8"))
        cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
        for variant, vcfg in variants(tok_json, cfg).items():
            with tempfile.TemporaryDirectory() as tmp:
                os.symlink(os.path.abspath(path), os.path.join(tmp, "tokenizer.json"))
                with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                    json.dump(vcfg, f, ensure_ascii=False)
                try:
                    a = AutoTokenizer.from_pretrained(tmp)
                    found = [added_ids(a, t) for t in TEXTS]
                except Exception as e:  # noqa: BLE001 (e.g. CodeLlama wants an <unk> token)
                    print(f"{name} {variant}: transformers cannot encode ({str(e)[:80]}); left out")
                    continue
            if any(f != found[0] for f in found):
                raise RuntimeError(f"{name}/{variant}: added ids differ between texts: {found}")
            prefix, suffix = found[0]
            # The committed variant is read from the fixture folder itself by the test.
            case = {"tokenizer": name, "variant": variant, "class": type(a).__name__,
                    "prefix": prefix, "suffix": suffix}
            if variant != "committed":
                case["config"] = vcfg
            cases.append(case)
            print(f"{name} {variant} ({type(a).__name__}): prefix {prefix} suffix {suffix}")
    out = {"transformers": transformers.__version__, "texts": TEXTS, "cases": cases}
    with open(os.path.join(FIX, "specials.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
