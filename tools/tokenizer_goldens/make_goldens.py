#!/usr/bin/env python3
"""Builds the tokenizer conformance fixtures under tests/fixtures/tokenizers/.

Every expected output comes from the Hugging Face `tokenizers` package (never from lathe):
  corpus.jsonl                  the input strings ({"text": ...} per line)
  <name>/tokenizer.json         small tokenizers trained here, one per model / component family
  <name>/tokenizer_config.json
  <name>/goldens.jsonl          per corpus line: ids without / with special tokens, and the
                                decoded text of the latter (skip_special_tokens false / true);
                                then "decode" lines for random id sequences
  real-<name>/goldens.jsonl     the same for ../shared/data/tokenizers/<name> (the files
                                themselves are not copied)
  meta.json                     package versions, vocab sizes

tokenizer_config.json is applied as transformers 5.x does beside a tokenizer.json
(docs/tokenizer.md): add_bos_token / add_eos_token are ignored and tokenizer.json's
post-processor decides, except CodeLlamaTokenizer ("[bos] $A") and GPTNeoXTokenizer ("$A").
transformers 5 rebuilds some classes' pipelines from their own definition; the script reports
how often AutoTokenizer (v5) agrees. special_goldens.py checks the special-token rule itself
against AutoTokenizer.

Usage: /opt/tok-venv/bin/python tools/tokenizer_goldens/make_goldens.py [--shared DIR]
       [--goldens-only]   rewrite the goldens of the committed files (no training)
"""
import argparse
import json
import os
import random
import sys

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

sys.path.insert(0, os.path.dirname(__file__))
import charsmap  # noqa: E402
import corpus  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizers")


def training_text(latin_only=False):
    """The corpus base lines, shuffled; latin_only keeps lines below U+0250, so that other
    scripts exercise unk / byte_fallback paths."""
    rng = random.Random(7)
    lines = [s for s in corpus.BASE if s and (not latin_only or max(map(ord, s)) < 0x250)]
    out = []
    for _ in range(30):
        rng.shuffle(lines)
        out.extend(lines)
    return out


def add_byte_tokens(tok, unigram=False):
    """Appends <0x00>..<0xFF> to the model vocabulary (byte_fallback needs them)."""
    j = json.loads(tok.to_str())
    m = j["model"]
    if unigram:
        m["vocab"].extend([[f"<0x{b:02X}>", -30.0] for b in range(256)])
        m["byte_fallback"] = True
    else:
        n = max(m["vocab"].values()) + 1
        for b in range(256):
            m["vocab"].setdefault(f"<0x{b:02X}>", n + b)
        m["byte_fallback"] = True
    # Added tokens must keep ids above the model's.
    return Tokenizer.from_str(json.dumps(j))


def bpe_trainer(vocab, specials, **kw):
    return trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                               **kw)


def make_bpe_bytelevel():
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(training_text(), bpe_trainer(
        800, ["<s>", "<pad>", "</s>", "<unk>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    t.add_tokens([AddedToken("[NEW]", single_word=True, normalized=True),
                  AddedToken("<extra>", rstrip=True, normalized=False)])
    t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                    ("<s>", t.token_to_id("<s>")))
    cfg = {"tokenizer_class": "RobertaTokenizer", "add_prefix_space": True,
           "bos_token": "<s>", "eos_token": "</s>",
           "unk_token": "<unk>", "pad_token": "<pad>", "clean_up_tokenization_spaces": False}
    return t, cfg


def make_bpe_spm():
    t = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
    t.train_from_iterator(training_text(latin_only=True),
                          bpe_trainer(700, ["<unk>", "<s>", "</s>"]))
    t = add_byte_tokens(t)
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                   decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    t.add_special_tokens([AddedToken("<think>", normalized=False, special=True),
                          AddedToken("</think>", normalized=False, special=True)])
    j = json.loads(t.to_str())
    # The "a b" string form of merges (older files and the spm-bpe-32k file use it).
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
    t = Tokenizer.from_str(json.dumps(j))
    cfg = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": True,
           "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
           "clean_up_tokenization_spaces": False, "legacy": True}
    return t, cfg


def make_unigram(byte_fallback):
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.Replace(Regex(" {2,}"), " "),
                                         normalizers.NFKC(), normalizers.Lowercase()])
    t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    t.train_from_iterator(training_text(latin_only=True), trainers.UnigramTrainer(
        vocab_size=400, special_tokens=["<pad>", "<unk>", "<s>", "</s>"], unk_token="<unk>",
        show_progress=False))
    if byte_fallback:
        t = add_byte_tokens(t, unigram=True)
        t.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    else:
        t.decoder = decoders.Sequence([decoders.Metaspace(),
                                       decoders.Replace(Regex("[0-9]+"), "<num>")])
    t.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 3)])
    cfg = {"tokenizer_class": "T5Tokenizer", "eos_token": "</s>", "unk_token": "<unk>",
           "pad_token": "<pad>"}
    return t, cfg


def make_unigram_precompiled():
    """T5 / ALBERT style: a Precompiled charsmap normalizer (built by charsmap.py)."""
    t, cfg = make_unigram(False)
    j = json.loads(t.to_str())
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": charsmap.build(charsmap.MAPPING)},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    j["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                    "split": True}
    return Tokenizer.from_str(json.dumps(j)), cfg


def make_wordpiece():
    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer(lowercase=True)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    t.train_from_iterator(training_text(), trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=specials, show_progress=False))
    t.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    cfg = {"tokenizer_class": "BertTokenizer", "unk_token": "[UNK]", "pad_token": "[PAD]",
           "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}
    return t, cfg


def make_wordlevel():
    t = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                         normalizers.Lowercase(), normalizers.Strip()])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                               pre_tokenizers.Punctuation("isolated")])
    t.train_from_iterator(training_text(), trainers.WordLevelTrainer(
        vocab_size=500, special_tokens=["[UNK]", "[PAD]"], show_progress=False))
    return t, {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
               "pad_token": "[PAD]"}


def char_bpe(pre, vocab=500, normalizer=None, decoder=None, latin_only=False, **model_kw):
    """A character-level BPE (unknown characters become <unk>) with the given components."""
    t = Tokenizer(models.BPE(unk_token="<unk>", **model_kw))
    if normalizer is not None:
        t.normalizer = normalizer
    t.pre_tokenizer = pre
    kw = {k: v for k, v in model_kw.items() if k in ("continuing_subword_prefix",
                                                     "end_of_word_suffix")}
    t.train_from_iterator(training_text(latin_only), bpe_trainer(vocab, ["<unk>", "<pad>"], **kw))
    if decoder is not None:
        t.decoder = decoder
    return t, {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
               "pad_token": "<pad>"}


def fixtures():
    return {
        "bpe_bytelevel": make_bpe_bytelevel,
        "bpe_spm": make_bpe_spm,
        "unigram": lambda: make_unigram(True),
        "unigram_unk": lambda: make_unigram(False),
        "unigram_precompiled": make_unigram_precompiled,
        "wordpiece": make_wordpiece,
        "wordlevel": make_wordlevel,
        "pre_whitespace": lambda: char_bpe(
            pre_tokenizers.Whitespace(), end_of_word_suffix="</w>",
            normalizer=normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents()]),
            decoder=decoders.BPEDecoder(suffix="</w>")),
        "pre_punct_digits": lambda: char_bpe(
            pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                     pre_tokenizers.Punctuation("contiguous"),
                                     pre_tokenizers.Digits(individual_digits=True)]),
            continuing_subword_prefix="##", decoder=decoders.WordPiece(prefix="##")),
        "pre_scripts": lambda: char_bpe(
            pre_tokenizers.Sequence([pre_tokenizers.UnicodeScripts(),
                                     pre_tokenizers.Digits(individual_digits=False)]),
            normalizer=normalizers.Strip(left=True, right=False)),
        "pre_split_a": lambda: char_bpe(
            pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(r"\s+"), "merged_with_previous"),
                pre_tokenizers.Split(Regex(r"\p{P}+"), "contiguous")]),
            decoder=decoders.Strip(" ", 0, 1)),
        "pre_split_b": lambda: char_bpe(
            pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(r"[aeiou]"), "merged_with_next", invert=True),
                pre_tokenizers.Split("o", "removed"),
                pre_tokenizers.Split(Regex(r"\d"), "isolated", invert=True)]),
            normalizer=normalizers.Replace("ß", "ss")),
        "pre_chardelim": lambda: char_bpe(
            pre_tokenizers.CharDelimiterSplit("e"), latin_only=True,
            decoder=decoders.CTC(pad_token="<pad>", word_delimiter_token="|")),
        "pre_metaspace_first_strip": lambda: char_bpe(
            pre_tokenizers.Metaspace(prepend_scheme="first", split=True),
            normalizer=normalizers.Sequence([normalizers.Strip(left=True, right=False),
                                             normalizers.NFD(), normalizers.StripAccents()]),
            decoder=decoders.Metaspace(prepend_scheme="first")),
        "pre_metaspace_nosplit": lambda: char_bpe(
            pre_tokenizers.Metaspace(replacement="_", prepend_scheme="never", split=False),
            normalizer=normalizers.Sequence([normalizers.Strip(), normalizers.Prepend("_")]),
            decoder=decoders.Sequence([decoders.Metaspace(replacement="_",
                                                          prepend_scheme="never"),
                                       decoders.Strip(" ", 2, 0)])),
        "bpe_ignore_merges": lambda: char_bpe(
            pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(r" ?\p{L}+| ?\p{N}{1,3}|\s+|[^\s\p{L}\p{N}]+"),
                                     "isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
            vocab=900, ignore_merges=True, decoder=decoders.ByteLevel()),
    }


def apply_config(t, cfg):
    """transformers 5.x: tokenizer.json's post-processor, but for two classes' own."""
    cls = (cfg.get("tokenizer_class") or "").removesuffix("Fast")
    if cls == "CodeLlamaTokenizer":
        v = cfg.get("bos_token") or "<s>"
        bos = v["content"] if isinstance(v, dict) else v
        t.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
            special_tokens=[(bos, t.token_to_id(bos))])
    elif cls == "GPTNeoXTokenizer":
        t.post_processor = processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1",
                                                         special_tokens=[])
    return t


def goldens(t, texts, path, seed):
    rng = random.Random(seed)
    n = t.get_vocab_size(with_added_tokens=True)
    with open(path, "w", encoding="utf-8") as f:
        for i, s in enumerate(texts):
            plain = t.encode(s, add_special_tokens=False).ids
            special = t.encode(s, add_special_tokens=True).ids
            rec = {"i": i, "ids": plain, "ids_special": special,
                   "text": t.decode(special, skip_special_tokens=False),
                   "text_skip": t.decode(special, skip_special_tokens=True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        # Random id sequences: decoders on arbitrary input (broken UTF-8, stray specials).
        for k in range(60):
            ids = [rng.randrange(n) for _ in range(rng.randint(1, 24))]
            rec = {"decode": ids, "text": t.decode(ids, skip_special_tokens=False),
                   "text_skip": t.decode(ids, skip_special_tokens=True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "data", "tokenizers"))
    ap.add_argument("--goldens-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.goldens_only:
        texts = [json.loads(l)["text"] for l in open(os.path.join(OUT, "corpus.jsonl"),
                                                      encoding="utf-8")]
        meta = json.load(open(os.path.join(OUT, "meta.json")))
        for seed, name in enumerate(sorted(fixtures())):
            d = os.path.join(OUT, name)
            cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
            t = apply_config(Tokenizer.from_file(os.path.join(d, "tokenizer.json")), cfg)
            goldens(t, texts, os.path.join(d, "goldens.jsonl"), seed)
        for name in meta["real"]:
            src = os.path.join(args.shared, name)
            cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
            t = apply_config(Tokenizer.from_file(os.path.join(src, "tokenizer.json")), cfg)
            goldens(t, texts, os.path.join(OUT, "real-" + name, "goldens.jsonl"),
                    100 + len(name))
        return
    texts = corpus.build()
    with open(os.path.join(OUT, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for s in texts:
            f.write(json.dumps({"text": s}, ensure_ascii=False) + "\n")
    meta = {"tokenizers": tokenizers.__version__, "corpus_lines": len(texts), "fixtures": {},
            "real": {}}
    for seed, (name, make) in enumerate(sorted(fixtures().items())):
        t, cfg = make()
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        t.save(os.path.join(d, "tokenizer.json"))
        write_json(os.path.join(d, "tokenizer_config.json"), cfg)
        # Reload from disk so the goldens describe exactly the committed file.
        t = apply_config(Tokenizer.from_file(os.path.join(d, "tokenizer.json")), cfg)
        goldens(t, texts, os.path.join(d, "goldens.jsonl"), seed)
        meta["fixtures"][name] = {"vocab_size": t.get_vocab_size(with_added_tokens=True)}
        print(name, meta["fixtures"][name])
    for name in ("qwen3", "spm-bpe-32k", "gpt-oss"):
        src = os.path.join(args.shared, name)
        if not os.path.isdir(src):
            print("skipping", name, "(", src, "missing )")
            continue
        with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        t = apply_config(Tokenizer.from_file(os.path.join(src, "tokenizer.json")), cfg)
        d = os.path.join(OUT, "real-" + name)
        os.makedirs(d, exist_ok=True)
        goldens(t, texts, os.path.join(d, "goldens.jsonl"), 100 + len(name))
        info = {"vocab_size": t.get_vocab_size(with_added_tokens=True)}
        try:  # How transformers (this version) compares, for the record only.
            import transformers
            a = transformers.AutoTokenizer.from_pretrained(src)
            same = sum(a(s, add_special_tokens=True)["input_ids"] ==
                       t.encode(s, add_special_tokens=True).ids for s in texts)
            info["transformers"] = transformers.__version__
            info["transformers_autotokenizer_same_ids"] = f"{same}/{len(texts)}"
        except Exception as e:  # noqa: BLE001
            info["transformers_error"] = str(e)[:200]
        meta["real"][name] = info
        print(name, info)
    write_json(os.path.join(OUT, "meta.json"), meta)


if __name__ == "__main__":
    main()
