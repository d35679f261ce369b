#!/usr/bin/env python3
"""Expected chat-template renderings from transformers' apply_chat_template(tokenize=False).

For every fixture folder in tests/fixtures/chat_templates/ and every conversation in
conversations.json, with add_generation_prompt false and true, records the rendered text, or the
exception when the template raises (lathe must raise too). Writes goldens.json beside them.

The fixture folder is loaded the way a model folder is: PreTrainedTokenizerFast.from_pretrained
on a copy of it (plus a one-token tokenizer.json, since only the template matters), so the
special tokens and the template precedence are transformers' own. The processor-only
chat_template.json form is read here and passed as chat_template=..., as a processor does.

strftime_now() is made deterministic by pinning datetime.now() in transformers'
chat_template_utils to NOW below; the C++ test passes the same local time.

Usage: /opt/jinja-venv/bin/python tools/chat_template_goldens/make_goldens.py
"""
import datetime as dt
import json
import pathlib
import shutil
import tempfile

import jinja2
import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast
from transformers.utils import chat_template_utils

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "chat_templates"
NOW = dt.datetime(2024, 7, 26, 12, 0, 0)


class FixedDatetime(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


def load(folder):
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / folder.name
        shutil.copytree(folder, copy)
        tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
        tok.save(str(copy / "tokenizer.json"))
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(copy))
    template = None
    if (folder / "chat_template.json").exists() and tokenizer.chat_template is None:
        template = json.loads((folder / "chat_template.json").read_text())["chat_template"]
    return tokenizer, template


def main():
    chat_template_utils.datetime = FixedDatetime
    conversations = json.loads((FIXTURES / "conversations.json").read_text())
    cases = []
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        tokenizer, template = load(folder)
        for conv_name, conv in conversations.items():
            for agp in (False, True):
                case = {"fixture": folder.name, "conversation": conv_name, "add_generation_prompt": agp}
                try:
                    case["text"] = tokenizer.apply_chat_template(
                        conv["messages"], tools=conv.get("tools"), documents=conv.get("documents"),
                        chat_template=template, add_generation_prompt=agp, tokenize=False,
                        **conv.get("kwargs", {}))
                except Exception as e:  # the template raised: lathe must raise as well
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    out = {
        "generator": "tools/chat_template_goldens/make_goldens.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "now": NOW.isoformat(),
        "cases": cases,
    }
    (FIXTURES / "goldens.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    errors = sum("error" in c for c in cases)
    print(f"{len(cases)} cases, {errors} raise")


if __name__ == "__main__":
    main()
