"""Counter-based weight generator, reproduced bit for bit by lathe (src/io/tiny_checkpoint.cpp).

Element i of tensor `name` is center + scale * u, where u in [-1, 1) comes from splitmix64 of
(seed XOR fnv1a64(name)) + (i + 1) * golden-ratio constant, keeping 24 bits so u is exact in
float32. The value is computed in float64 and rounded once to float32.
"""
import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & MASK
    return h


def uniform(seed: int, name: str, count: int) -> np.ndarray:
    """count values in [-1, 1) as float64 (each exactly representable in float32)."""
    with np.errstate(over="ignore"):
        i = np.arange(1, count + 1, dtype=np.uint64)
        z = np.uint64((seed ^ fnv1a64(name)) & MASK) + i * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    top = (z >> np.uint64(40)).astype(np.float64)
    return (top - 8388608.0) / 8388608.0


def generate(seed: int, name: str, shape, center: float, scale: float) -> np.ndarray:
    count = int(np.prod(shape)) if len(shape) else 1
    values = center + scale * uniform(seed, name, count)
    return values.astype(np.float32).reshape(shape)


# Input embeddings by their names in transformers (Llama-style, GPTNeoX, GPT-J and GPT-2);
# make_tiny also rates a model's input embedding under any other name (Bloom, Falcon) so.
EMBEDDINGS = ("embed_tokens.weight", "embed_in.weight", "wte.weight")
# The projections that end a residual branch (attention output, MLP output): Llama-style
# o_proj / down_proj, GPT-2 attn.c_proj, OPT and GPT-J out_proj, OPT and Phi fc2, GPTNeoX,
# Bloom and Falcon attention.dense / dense_4h_to_h, Phi self_attn.dense, GPT-J mlp.fc_out.
# (Starcoder2's mlp.c_proj predates the list and keeps its goldens; GPT-2's is left as it.)
# Experts: Mixtral's w2 and GraniteMoe's output_linear (Qwen-style experts say down_proj).
RESIDUAL_OUTPUTS = ("o_proj.weight", "down_proj.weight", "attn.c_proj.weight", "out_proj.weight",
                    "fc2.weight", "attention.dense.weight", "self_attn.dense.weight",
                    "dense_4h_to_h.weight", "mlp.fc_out.weight", ".w2.weight",
                    "output_linear.weight")


def is_embedding(name: str) -> bool:
    return name.endswith(EMBEDDINGS)


def init_rule(name: str, shape) -> tuple[float, float]:
    """(center, scale) for a tensor: unit-variance linears, wide embeddings so greedy
    choices have clear margins, norms near one, small biases."""
    if len(shape) == 1:
        if name.endswith("bias"):
            return 0.0, 0.2
        return 1.0, 0.2
    if is_embedding(name) or name.startswith(("lm_head", "embed_out")):
        return 0.0, 1.0
    fan_in = shape[-1]
    scale = float(np.sqrt(3.0 / fan_in))
    # Residual-branch outputs are widened so that layers, not the token's own embedding,
    # decide the next token (otherwise tied models just repeat their input).
    if name.endswith(RESIDUAL_OUTPUTS):
        scale *= 3.0
    return 0.0, scale
