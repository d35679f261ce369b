"""The conformance corpus: deterministic, multilingual, full of tokenizer edge cases."""
import random

BASE = [
    "",
    " ",
    "  ",
    "\n",
    "\t",
    "Hello world",
    "Hello, world!",
    " Hello world",
    "Hello world ",
    "hello   world",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "I'm sure you've heard they'll say it's what we'd do.",
    "DON'T SHOUT, YOU'RE LOUD",
    "e-mail: john.doe@example.com, url: https://example.org/path?q=1&r=2#frag",
    "Price: $1,234.56 (≈ €1.100) — 15% off!",
    "1234567890",
    "3.14159265358979323846264338327950288419716939937510",
    "000000000000000000000000000000000000001",
    "2024-01-15T12:34:56Z",
    "Phone +1 (555) 010-9999 ext. 42",
    "Ünïcödé façade naïve café résumé coöperate",
    "Straße groß Maß Fußball",
    "İstanbul ıi ǅ ǈ ǋ",
    "ΑΒΓΔ αβγδ Σίσυφος ΣΊΣΥΦΟΣ ὀδυσσεύς",
    "Привет, мир! Как дела? ЁЖИК ёжик",
    "Україна, Київ — ґанок, їжак, є",
    "你好，世界！我爱自然语言处理。",
    "東京は日本の首都です。ひらがな カタカナ ー 漢字",
    "한국어 텍스트입니다. 안녕하세요!",
    "مرحبا بالعالم! كيف حالك؟ ١٢٣٤٥",
    "שלום עולם! מה שלומך?",
    "नमस्ते दुनिया। हिन्दी में लिखा गया पाठ।",
    "বাংলা ভাষা সুন্দর",
    "தமிழ் மொழி",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Tiếng Việt có dấu: người, được, những",
    "ქართული ენა",
    "Հայերեն լեզու",
    "አማርኛ ቋንቋ",
    "ພາສາລາວ",
    "ខ្មែរ",
    "မြန်မာဘာသာ",
    "😀😃😄😁😆😅😂🤣",
    "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🇺🇸🇫🇷 flags",
    "❤️ ♥ ☺︎ ✔️ ✅ ⭐",
    "e\u0301 a\u0300 o\u0308 n\u0303 combining marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333",
    "ﬁ ﬂ ﬀ ① ② ③ ㎏ ㎞ ™ ½ ¼ Ⅻ ｆｕｌｌｗｉｄｔｈ",
    "x² + y³ = z⁴, H₂O, 10⁻⁶",
    "\u00a0non-breaking\u00a0space\u2003em space\u3000ideographic",
    "zero\u200bwidth\u200cjoiner\u200dtest\ufeffbom",
    "tab\tseparated\tvalues\t\t\tend",
    "line one\nline two\r\nline three\rline four",
    "\n\n\nmany newlines\n\n\n\n",
    "trailing spaces    ",
    "    leading spaces",
    "mixed \t \n \r\n whitespace",
    "def foo(x):\n    return x * 2  # comment\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "#include <stdio.h>\nint main() { printf(\"%d\\n\", 42); }",
    "SELECT * FROM users WHERE id = 1 AND name LIKE '%bob%';",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "$ ls -la | grep '.txt' > out.log 2>&1 && echo done",
    "camelCaseVariableName snake_case_name SCREAMING_CASE kebab-case-name",
    "a" * 100,
    "ab" * 60,
    "!!!???...,,,;;;:::",
    "((((([[[[{{{{}}}}]]]])))))",
    "--- *** ___ === +++ ~~~",
    "'quoted' \"double\" `backtick` «guillemets» „German“ 「Japanese」",
    "...and then... she said... 'no'.",
    "Mr. Smith went to Washington D.C. at 5 p.m. on Jan. 3rd.",
    "U.S.A. vs. U.K. — a 2-1 win!",
    "naïve coöperation—rôle of the élite",
    "ℌ𝔢𝔩𝔩𝔬 𝕎𝕠𝕣𝕝𝕕 𝐁𝐨𝐥𝐝",
    "𠀀𠀁𠀂 rare CJK ext B 𪜀",
    "\u0000null\u0001control\u001fchars\u007f",
    "\ufffd replacement char",
    "private use \ue000\uf8ff",
    "Ω ≈ ç √ ∫ ˜ µ ≤ ≥ ÷",
    "←↑→↓↔ ∀∃∅∈∉ ⊂⊃ ∧∨ ¬",
    "I have 3 apples and 12 oranges, total 15.",
    "Call 911! Room 101, floor 7.",
    "version 1.2.3-beta+build.42",
    "0x1F 0b1010 0o777 1e-10 6.02e23",
    "mañana el niño comió piña",
    "Ça va? Où est la bibliothèque? Très bien!",
    "Dziękuję bardzo, żółć, źdźbło",
    "Čeština: příliš žluťoučký kůň",
    "Türkçe: çğıöşü ÇĞİÖŞÜ",
    "Íslenska: þ ð æ ö",
    "Română: ăâîșț",
    "Magyar: árvíztűrő tükörfúrógép",
    "Suomi: hyvää päivää",
    "Nederlands: ĳs Ĳsland",
]

SPECIALS = [
    "<s>", "</s>", "<unk>", "<pad>", "<mask>", "[CLS]", "[SEP]", "[MASK]", "[UNK]",
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|startoftext|>", "<|return|>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<think>", "</think>", "[NEW]",
    "<extra>",
]

WORDS = [w for s in BASE for w in s.split() if w]


def build(seed=1234, total=560):
    rng = random.Random(seed)
    out = list(BASE)
    # Special tokens in text, with and without surrounding spaces.
    for sp in SPECIALS:
        out.append(f"{sp}Hello{sp}")
        out.append(f"  {sp}  world  {sp}")
    out.append("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n")
    out.append("<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>")
    out.append("<s> [INST] hello [/INST] answer</s>")
    out.append("[CLS] first [SEP] second [SEP]")
    out.append("a<mask>b <mask> c  <mask>  d")
    out.append("The [NEW] token [NEW]ly in x[NEW]y and [NEW].")
    out.append("<extra> <extra><extra>  <extra>")
    out.append("<s<s></s</s>>")
    # Digit runs of many lengths.
    for n in (1, 2, 3, 4, 5, 7, 9, 12, 17, 33):
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    # Whitespace runs.
    for ws in (" " * 2, " " * 3, " " * 8, "\t\t", "\n\n", "\r\n", " \n ", "\t \t", "\u3000\u3000"):
        out.append(f"a{ws}b{ws}")
        out.append(f"{ws}x")
    # Random mixtures of words, specials, digits and whitespace.
    pool_ws = [" ", "  ", "\n", "\t", " \n", ""]
    while len(out) < total:
        k = rng.randint(1, 12)
        parts = []
        for _ in range(k):
            r = rng.random()
            if r < 0.7:
                parts.append(rng.choice(WORDS))
            elif r < 0.8:
                parts.append(rng.choice(SPECIALS))
            elif r < 0.9:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 8))))
            else:
                parts.append(rng.choice(["😀", "👍🏽", "🏳️‍🌈", "€", "—", "…", "ß", "é"]))
            parts.append(rng.choice(pool_ws))
        out.append("".join(parts))
    return out
