#!/usr/bin/env python3
"""Reads a model that `lathe pull` put in the Hugging Face cache back through huggingface_hub
and transformers, offline (HF_HUB_CACHE and HF_HUB_OFFLINE=1 set by the caller), for
tests/hub/pull_test.cpp.

Usage: read_cache.py REPO_ID PROMPT_IDS_JSON NEW_TOKENS
Prints one JSON object: the snapshot folder snapshot_download(local_files_only=True) finds,
its files, the sha256 of model.safetensors read through it, the architectures of the config
transformers reads, and (where torch is installed) NEW_TOKENS greedy tokens transformers
generates from the prompt with the model it loads from the cache; null without torch.
"""
import hashlib
import json
import os
import sys

from huggingface_hub import snapshot_download
import transformers


def main():
    repo, prompt, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    path = snapshot_download(repo, local_files_only=True)
    files = sorted(os.path.relpath(os.path.join(d, f), path)
                   for d, _, names in os.walk(path) for f in names)
    with open(os.path.join(path, "model.safetensors"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    config = transformers.AutoConfig.from_pretrained(repo, local_files_only=True)
    out = {"snapshot": path, "files": files, "model_sha256": sha,
           "architectures": config.architectures, "generated": None}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            repo, local_files_only=True, dtype=torch.float32)
        ids = torch.tensor([prompt])
        with torch.no_grad():
            gen = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        out["generated"] = gen[0, len(prompt):].tolist()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
