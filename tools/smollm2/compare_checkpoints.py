#!/usr/bin/env python3
"""Compare a checkpoint built by build_checkpoint.py with one written by transformers.

    python tools/smollm2/compare_checkpoints.py BUILT REFERENCE [--with-transformers]

Checks, and prints measured figures for:
  * tensors: same names, shapes, dtypes; bit-identical data (max abs diff reported);
  * config.json: the fields a runtime needs;
  * generation_config.json: bos/eos/pad ids;
  * tokenizer.json: same JSON, and identical encodings (ids, offsets) of a few hundred
    strings through `tokenizers`;
  * with --with-transformers: both folders loaded by AutoTokenizer give identical
    encodings and identical chat-template renderings, and AutoConfig gives the same values.

Needs numpy, safetensors, tokenizers (transformers only for --with-transformers); no torch.
Exit status 0 only if every check passes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

CONFIG_FIELDS = [
    "architectures",
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "rms_norm_eps",
    "tie_word_embeddings",
    "vocab_size",
    "max_position_embeddings",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "attention_bias",
    "mlp_bias",
]


def rope_theta(cfg: dict):
    if "rope_parameters" in cfg and isinstance(cfg["rope_parameters"], dict):
        return cfg["rope_parameters"].get("rope_theta")
    return cfg.get("rope_theta")


def test_strings() -> list[str]:
    """A fixed, varied set of strings (a few hundred) for tokenizer comparisons."""
    base = [
        "",
        " ",
        "  ",
        "\n",
        "\n\n\n",
        "\t",
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        " leading space",
        "trailing space ",
        "multiple   spaces   inside",
        "line one\nline two\r\nline three",
        "I'm sure they'll say it's what we've done, isn't it? You'd know.",
        "DON'T SHOUT! I'M HERE.",
        "Numbers: 0 1 12 123 1234 12345 3.14159 -42 1e-5 0x1F 2024-11-30 10,000,000",
        "Phone +1 (555) 123-4567, ISBN 978-3-16-148410-0",
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
        "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
        "#include <vector>\nstd::vector<int> v{1, 2, 3};",
        "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
        '{"key": "value", "list": [1, 2, 3], "nested": {"a": null}}',
        "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
        "https://example.com/path?query=1&other=two#frag",
        "user@example.org",
        "Le renard brun rapide saute par-dessus le chien paresseux.",
        "Der schnelle braune Fuchs springt über den faulen Hund. Größe, Straße.",
        "El rápido zorro marrón salta sobre el perro perezoso. ¿Qué tal? ¡Hola!",
        "Быстрая коричневая лиса прыгает через ленивую собаку.",
        "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
        "敏捷的棕色狐狸跳过了懒狗。",
        "素早い茶色の狐が怠け者の犬を飛び越える。",
        "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
        "الثعلب البني السريع يقفز فوق الكلب الكسول",
        "नमस्ते दुनिया",
        "Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
        "Math: ∀x ∈ ℝ, x² ≥ 0; ∑_{i=1}^{n} i = n(n+1)/2; α β γ δ",
        "Accents: café naïve résumé coöperate Ångström",
        "Zero\u200bwidth\u200cjoiners\u200d and nbsp\u00a0here",
        "Control chars \x00 \x01 \x7f and bell \x07",
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|>",
        "text<|endoftext|>more text",
        "<|im_start|><|im_end|><|im_start|>",
        "<repo_name>lathe<file_sep>src/main.cpp<filename>x.py<gh_stars>10",
        "<jupyter_start><jupyter_code>print(1)<jupyter_output>1<empty_output>",
        "< |im_start| > not special",
        "<|im_start",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "!!!???...,,,;;;:::",
        "    indented code block\n        more indented",
        "Tabs\tand\tmore\ttabs",
        "Mixed 中文 and English 文字 together",
        "A list:\n1. apples\n2. bananas\n3. cherries\n- dash item\n* star item",
        "Markdown **bold** _italic_ `code` [link](http://x.y)",
        "$$E = mc^2$$ and \\frac{a}{b}",
        "C:\\Users\\name\\Documents\\file.txt",
        "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
        "What is the capital of France?",
        "Once upon a time, in a land far away,",
    ]
    rng = random.Random(1234)
    pool = (
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        " \n\t.,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`"
        "éèêëàâäôöûüçñßøåæœ" "αβγδ" "абв" "中文字" "日本" "한" "😀🎉" "\u200d\u00a0"
    )
    words = [w for s in base for w in s.split() if w]
    extra = []
    for i in range(160):
        n = rng.randint(1, 40)
        extra.append("".join(rng.choice(pool) for _ in range(n)))
    for i in range(120):
        n = rng.randint(1, 12)
        sep = rng.choice([" ", "  ", "\n", "", " \n", "\t"])
        extra.append(sep.join(rng.choice(words) for _ in range(n)))
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>"]
    for i in range(40):
        parts = [rng.choice(words) for _ in range(rng.randint(1, 6))]
        parts.insert(rng.randint(0, len(parts)), rng.choice(specials))
        extra.append(rng.choice([" ", "", "\n"]).join(parts))
    return base + extra


def compare_tensors(built: Path, ref: Path) -> bool:
    import numpy as np
    from safetensors import safe_open

    ok = True
    with safe_open(built / "model.safetensors", "np") as a, safe_open(ref / "model.safetensors", "np") as b:
        ka, kb = set(a.keys()), set(b.keys())
        if ka != kb:
            print(f"FAIL tensors: names differ: only built {sorted(ka - kb)}, only reference {sorted(kb - ka)}")
            ok = False
        max_diff = 0.0
        n_bitexact = 0
        n_elems = 0
        for name in sorted(ka & kb):
            x, y = a.get_tensor(name), b.get_tensor(name)
            if x.shape != y.shape or x.dtype != y.dtype:
                print(f"FAIL tensor {name}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
                ok = False
                continue
            n_elems += x.size
            same_bits = x.tobytes() == y.tobytes()
            n_bitexact += same_bits
            d = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
            max_diff = max(max_diff, d)
            if not same_bits:
                print(f"FAIL tensor {name}: not bit-identical, max abs diff {d}")
                ok = False
        print(
            f"{'OK  ' if ok else 'FAIL'} tensors: {len(ka & kb)} common of {len(ka)} built / {len(kb)} reference, "
            f"{n_bitexact} bit-identical, {n_elems} elements, max abs diff {max_diff}"
        )
    return ok


def compare_json_fields(built: Path, ref: Path) -> bool:
    ok = True
    a = json.loads((built / "config.json").read_text())
    b = json.loads((ref / "config.json").read_text())
    diffs = [(k, a.get(k, "<absent>"), b.get(k, "<absent>")) for k in CONFIG_FIELDS if a.get(k, "<absent>") != b.get(k, "<absent>")]
    if rope_theta(a) != rope_theta(b):
        diffs.append(("rope_theta", rope_theta(a), rope_theta(b)))
    for k, x, y in diffs:
        print(f"FAIL config {k}: built {x!r} reference {y!r}")
    ok &= not diffs
    print(f"{'OK  ' if not diffs else 'FAIL'} config: {len(CONFIG_FIELDS) + 1} fields compared, {len(diffs)} differ")
    extra_a = sorted(set(a) - set(b))
    extra_b = sorted(set(b) - set(a))
    other = sorted(k for k in set(a) & set(b) if a[k] != b[k] and k not in CONFIG_FIELDS)
    print(f"     config keys only in built: {extra_a}; only in reference: {extra_b}; other differing: {other}")

    ga = json.loads((built / "generation_config.json").read_text())
    gb = json.loads((ref / "generation_config.json").read_text())
    gdiff = [k for k in ("bos_token_id", "eos_token_id", "pad_token_id") if ga.get(k) != gb.get(k)]
    print(f"{'OK  ' if not gdiff else 'FAIL'} generation_config: bos/eos/pad ids {'equal' if not gdiff else gdiff}")
    ok &= not gdiff
    return ok


def compare_tokenizer_json(built: Path, ref: Path, strings: list[str]) -> bool:
    from tokenizers import Tokenizer

    ja = json.loads((built / "tokenizer.json").read_text(encoding="utf-8"))
    jb = json.loads((ref / "tokenizer.json").read_text(encoding="utf-8"))
    same_json = ja == jb
    print(f"{'OK  ' if same_json else 'FAIL'} tokenizer.json: parsed JSON {'identical' if same_json else 'differs'}")
    if not same_json:
        for k in sorted(set(ja) | set(jb)):
            if ja.get(k) != jb.get(k):
                print(f"     differs at top-level key {k!r}")
    ta = Tokenizer.from_file(str(built / "tokenizer.json"))
    tb = Tokenizer.from_file(str(ref / "tokenizer.json"))
    bad = 0
    n_tokens = 0
    for s in strings:
        for special in (False, True):
            ea, eb = ta.encode(s, add_special_tokens=special), tb.encode(s, add_special_tokens=special)
            n_tokens += len(ea.ids)
            if ea.ids != eb.ids or ea.offsets != eb.offsets:
                bad += 1
                print(f"FAIL encoding differs for {s!r}")
        if ta.decode(ta.encode(s).ids, skip_special_tokens=False) != tb.decode(tb.encode(s).ids, skip_special_tokens=False):
            bad += 1
            print(f"FAIL decoding differs for {s!r}")
    print(
        f"{'OK  ' if not bad else 'FAIL'} tokenizers encodings: {len(strings)} strings x 2 (add_special_tokens), "
        f"{n_tokens} tokens, {bad} mismatches (ids+offsets, plus decode round-trip)"
    )
    return same_json and not bad


def compare_with_transformers(built: Path, ref: Path, strings: list[str]) -> bool:
    from transformers import AutoConfig, AutoTokenizer

    ok = True
    ta = AutoTokenizer.from_pretrained(str(built))
    tb = AutoTokenizer.from_pretrained(str(ref))
    bad = 0
    for s in strings:
        if ta(s)["input_ids"] != tb(s)["input_ids"]:
            bad += 1
            print(f"FAIL AutoTokenizer ids differ for {s!r}")
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        if getattr(ta, attr) != getattr(tb, attr):
            bad += 1
            print(f"FAIL AutoTokenizer {attr}: {getattr(ta, attr)} vs {getattr(tb, attr)}")
    conversations = [
        [{"role": "user", "content": "What is the capital of France?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        [
            {"role": "user", "content": "Write a haiku."},
            {"role": "assistant", "content": "Leaves fall."},
            {"role": "user", "content": "Another, in français s'il te plaît."},
        ],
    ]
    n_chat = 0
    for conv in conversations:
        for gen in (False, True):
            ra = ta.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            rb = tb.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            ia = ta(ra, add_special_tokens=False)["input_ids"]
            ib = tb(rb, add_special_tokens=False)["input_ids"]
            n_chat += 1
            if ra != rb or ia != ib:
                bad += 1
                print(f"FAIL chat template rendering differs for {conv!r} add_generation_prompt={gen}")
    print(
        f"{'OK  ' if not bad else 'FAIL'} AutoTokenizer: {len(strings)} strings, {n_chat} chat renderings, "
        f"special ids, {bad} mismatches ({type(ta).__name__} vs {type(tb).__name__})"
    )
    ok &= not bad

    ca, cb = AutoConfig.from_pretrained(str(built)).to_dict(), AutoConfig.from_pretrained(str(ref)).to_dict()
    ignore = {"_name_or_path", "_model_name_or_path", "transformers_version", "dtype", "torch_dtype"}
    cdiff = sorted(k for k in set(ca) | set(cb) if k not in ignore and ca.get(k) != cb.get(k))
    for k in cdiff:
        print(f"FAIL AutoConfig {k}: built {ca.get(k)!r} reference {cb.get(k)!r}")
    print(f"{'OK  ' if not cdiff else 'FAIL'} AutoConfig.to_dict(): {len(set(ca) | set(cb))} keys, {len(cdiff)} differ (ignoring {sorted(ignore)})")
    ok &= not cdiff
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("built", type=Path)
    parser.add_argument("reference", type=Path)
    parser.add_argument("--with-transformers", action="store_true")
    parser.add_argument("--skip-tensors", action="store_true")
    args = parser.parse_args(argv)
    strings = test_strings()
    ok = True
    if not args.skip_tensors:
        ok &= compare_tensors(args.built, args.reference)
    ok &= compare_json_fields(args.built, args.reference)
    ok &= compare_tokenizer_json(args.built, args.reference, strings)
    if args.with_transformers:
        ok &= compare_with_transformers(args.built, args.reference, strings)
    print("ALL CHECKS PASSED" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
