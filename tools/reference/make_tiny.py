#!/usr/bin/env python3
"""Builds tiny checkpoints from configs/<name>.json and writes goldens made by transformers.

For each config it writes tests/fixtures/tiny/<name>/:
  config.json, generation_config.json  as given in the spec (the published formats)
  weights.json         the tensor list with (center, scale) per tensor and the seed, from
                       which lathe regenerates the weights bit for bit (weightgen.py)
  goldens.safetensors  teacher-forced logits [T, vocab] and hidden states [states, T, hidden]:
                       embed, each layer's attention and MLP module outputs and its output,
                       final_norm (names in goldens.json; module_outputs.py); and
                       decode_logits [DECODE_ROWS, vocab], generate's raw logits for its first
                       greedy tokens (row 0 after the prompt, row i after greedy token i - 1
                       went through the KV cache); logits_bf16, decode_logits_bf16 (and _f16):
                       the same from every tensor rounded to bf16 (f16) and computed in f32;
                       and for mixtures of experts route_ids / route_weights [moe layers, T, k]
                       (and route_ids_bf16, ... of the rounded weights)
  goldens.json         ids, 32 greedy tokens with their top-1/top-2 margins (also of the
                       rounded weights), per-layer summaries, the MoE layers' route names,
                       and the transformers / torch versions that made them

A spec's "model_class" (e.g. Qwen3_5ForConditionalGeneration) makes and runs the checkpoint
with that class instead of AutoModelForCausalLM: a multimodal wrapper saved with its vision
tower, whose text logits are checked equal to AutoModelForCausalLM's of the same checkpoint.
Its "run_module" (e.g. language_model) runs that submodule of the wrapper instead, where the
wrapper's forward is broken on text; "attn_implementation" (e.g. eager) picks the attention
path of every model made or loaded.
"vision_tower_stand_in" builds Gemma3n's vision tower, a timm model (timm is not in the
reference environment), as a stand-in module of one convolution under the tower's published
prefix (vision_tower.timm_model.); text generation never runs it, and lathe does not load it.

Usage: make_tiny.py [--only NAME] [--out tests/fixtures/tiny]   (needs torch + transformers)
"""
import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers.pytorch_utils import Conv1D

import module_outputs
import weightgen

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
GOLDEN_FORMAT = 2  # 2: decode_logits
# Rows of decode_logits: the prompt's last position and 7 decode steps, 4 KiB at vocab 128.
DECODE_ROWS = 8


def counter_ids(seed: int, count: int, vocab: int, avoid: set[int]) -> list[int]:
    """Deterministic token ids in [0, vocab) avoiding eos ids."""
    u = weightgen.uniform(seed, "ids", count * 4)
    ids = [int((x + 1) / 2 * vocab) % vocab for x in u]
    return [i for i in ids if i not in avoid][:count]


def attn_kwargs() -> dict:
    """The spec's "attn_implementation" (e.g. "eager", where transformers would otherwise pick
    sdpa or flex attention), for every model made or loaded; none: transformers' default."""
    return {"attn_implementation": ATTN} if ATTN else {}


def new_model(cls, hf_config):
    """A fresh f32 model of hf_config (auto classes say from_config, model classes _from_config)."""
    make = cls.from_config if hasattr(cls, "from_config") else cls._from_config
    return make(hf_config, dtype=torch.float32, **attn_kwargs())


def model_class(spec: dict):
    """The class the fixture's checkpoint is made and run with: AutoModelForCausalLM, or the
    spec's "model_class" (a multimodal wrapper such as Qwen3_5ForConditionalGeneration, saved
    with its vision tower, whose forward on text runs its language model)."""
    return getattr(transformers, spec["model_class"]) if "model_class" in spec else \
        transformers.AutoModelForCausalLM


def saved_tensors(model, dtypes: dict | None = None) -> dict:
    """{name: shape} of the tensors save_pretrained writes for this model (and, into `dtypes`
    when given, {name: safetensors dtype name})."""
    from safetensors import safe_open

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        out = {}
        for f in sorted(pathlib.Path(tmp).glob("*.safetensors")):
            with safe_open(str(f), "pt") as st:
                for name in st.keys():
                    out[name] = list(st.get_slice(name).get_shape())
                    if dtypes is not None:
                        dtypes[name] = st.get_slice(name).get_dtype()
    return out


def load_published(cls, config: dict, tensors: dict):
    """The model from_pretrained makes of these tensors, saved as a checkpoint would be."""
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "config.json").write_text(json.dumps(config))
        save_file({n: t.numpy() for n, t in tensors.items()}, str(pathlib.Path(tmp) / "model.safetensors"),
                  metadata={"format": "pt"})
        model, info = cls.from_pretrained(tmp, dtype=torch.float32, output_loading_info=True,
                                          **attn_kwargs())
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    model.eval()
    return model


def fp8_block(config: dict):
    """The spec config's FP8 block (rows, cols) when its quantization_config is quant_method
    "fp8" (a block-scaled FP8 checkpoint, as DeepSeek V3 publishes), else None."""
    q = config.get("quantization_config") or {}
    return tuple(q["weight_block_size"]) if q.get("quant_method") == "fp8" else None


def fp8_quantized(name: str, t: torch.Tensor, block) -> bool:
    """The tensors an FP8 fixture stores quantized (lathe's tiny_checkpoint.cpp chooses the
    same): the decoder layers' 2-D projection weights whose sides the block divides."""
    return (t.dim() == 2 and name.endswith(".weight") and ".layers." in name and "norm" not in name
            and t.shape[0] % block[0] == 0 and t.shape[1] % block[1] == 0)


def fp8_checkpoint(state: dict, block) -> dict:
    """`state` as a block-scaled FP8 checkpoint, by the format's definition: per block of
    block[0] x block[1] weights, scale = max |w| / 448 (E4M3's largest value), codes
    e4m3(w / scale), and the scales stored as the weight's "_scale_inv"."""
    out = {}
    for name, t in state.items():
        if not fp8_quantized(name, t, block):
            out[name] = t
            continue
        rows, cols = t.shape
        blocks = t.reshape(rows // block[0], block[0], cols // block[1], block[1])
        scale = blocks.abs().amax(dim=(1, 3)) / 448.0
        out[name] = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn).reshape(rows, cols)
        out[name + "_scale_inv"] = scale
    return out


def load_fp8(config: dict, state: dict, block):
    """The model transformers loads from the FP8 checkpoint of `state`: on a CPU its FP8
    quantizer dequantizes the weights (Fp8Dequantize) into the f32 model. Returns it and the
    sha256 of the checkpoint's FP8 codes and scales (which lathe's regenerated fixture must
    reproduce byte for byte)."""
    import hashlib

    from safetensors.torch import save_file as save_torch

    quantized = fp8_checkpoint(state, block)
    digest = hashlib.sha256()
    for name in sorted(quantized):
        if name.endswith("_scale_inv"):
            weight = name[: -len("_scale_inv")]
            digest.update(quantized[weight].view(torch.uint8).numpy().tobytes())
            digest.update(quantized[name].numpy().tobytes())
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "config.json").write_text(json.dumps(config))
        save_torch({n: t.contiguous() for n, t in quantized.items()},
                   str(pathlib.Path(tmp) / "model.safetensors"), metadata={"format": "pt"})
        model = CLASS.from_pretrained(tmp, dtype=torch.float32, **attn_kwargs())
    model.eval()
    # What it loaded is each block's codes times its scale, in f32.
    for name, t in model.state_dict().items():
        if name + "_scale_inv" in quantized:
            codes, scale = quantized[name].float(), quantized[name + "_scale_inv"]
            expect = codes * scale.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)
            assert torch.equal(t, expect), name
    return model, digest.hexdigest(), {n for n in quantized if n + "_scale_inv" in quantized}


def mxfp4_fixture(config: dict) -> bool:
    """Whether the spec config's quantization_config is quant_method "mxfp4" (GptOss's experts
    as MXFP4 blocks and scales, as the published gpt-oss checkpoints hold them)."""
    return (config.get("quantization_config") or {}).get("quant_method") == "mxfp4"


def mxfp4_quantized(name: str, t: torch.Tensor) -> bool:
    """The tensors an MXFP4 fixture stores quantized (lathe's tiny_checkpoint.cpp chooses the
    same): GptOss's expert matrices, [experts, in, out] as transformers holds them."""
    return (t.dim() == 3 and t.shape[1] % 32 == 0
            and (name.endswith(".mlp.experts.gate_up_proj") or name.endswith(".mlp.experts.down_proj")))


# Midpoints between neighbouring E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
E2M1_MID = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def mxfp4_quantize(rows: np.ndarray):
    """Rows [..., cols] (f32, cols a multiple of 32) as MXFP4 by the OCP MX rule (lathe's
    core/mxfp4.cpp mxfp4_quantize): per block of 32 the scale 2^(floor(log2 max|v|) - 2) (E8M0
    byte 0 for a block of zeros, clamped to 0..254), each value the nearest E2M1 code of
    v / scale, ties to the even code, saturating at 6, the sign bit v's (-0 is code 8). Returns the
    checkpoint's blocks [..., cols / 32, 16] (low nibble the even value) and scales."""
    blocks = rows.astype(np.float32).reshape(*rows.shape[:-1], -1, 32)
    amax = np.abs(blocks).max(axis=-1)
    _, exp = np.frexp(amax)
    e = np.where(amax > 0, np.clip(exp.astype(np.int32) - 1 - 2 + 127, 0, 254), 0).astype(np.int32)
    scaled = np.ldexp(blocks, (127 - e)[..., None]).astype(np.float32)
    mag = np.abs(scaled)
    code = np.zeros(scaled.shape, np.uint8)
    for i, mid in enumerate(E2M1_MID):
        mid = np.float32(mid)
        code = np.where((mag > mid) | ((mag == mid) & (i % 2 == 1)), np.uint8(i + 1), code)
    code = np.where(np.signbit(scaled), code | 8, code).astype(np.uint8)
    packed = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8)
    return packed, e.astype(np.uint8)


def mxfp4_checkpoint(state: dict) -> dict:
    """`state` with GptOss's expert matrices as the published MXFP4 checkpoints store them:
    each expert's [in, out] matrix transposed into rows [out, in], quantized by
    mxfp4_quantize into name + "_blocks" [experts, out, in / 32, 16] and "_scales"."""
    out = {}
    for name, t in state.items():
        if not mxfp4_quantized(name, t):
            out[name] = t
            continue
        blocks, scales = mxfp4_quantize(t.transpose(1, 2).contiguous().numpy())
        out[name + "_blocks"] = torch.from_numpy(blocks)
        out[name + "_scales"] = torch.from_numpy(scales)
    return out


def load_mxfp4(config: dict, state: dict):
    """The model transformers loads from the MXFP4 checkpoint of `state`: on a CPU its MXFP4
    quantizer dequantizes the experts (Mxfp4Dequantize, convert_moe_packed_tensors) into the
    f32 model. Without the Triton kernels (and here without accelerate, which the quantized
    path checks for first) it dequantizes anyway; Mxfp4Config(dequantize=True) asks for that
    path directly. Returns the model, the sha256 of the checkpoint's blocks and scales (which
    lathe's regenerated fixture must reproduce byte for byte) and the dequantized names."""
    import hashlib

    from safetensors.torch import save_file as save_torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    quantized = mxfp4_checkpoint(state)
    digest = hashlib.sha256()
    for name in sorted(quantized):
        if name.endswith("_blocks"):
            digest.update(quantized[name].numpy().tobytes())
            digest.update(quantized[name[: -len("_blocks")] + "_scales"].numpy().tobytes())
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "config.json").write_text(json.dumps(config))
        save_torch({n: t.contiguous() for n, t in quantized.items()},
                   str(pathlib.Path(tmp) / "model.safetensors"), metadata={"format": "pt"})
        model, info = CLASS.from_pretrained(
            tmp, dtype=torch.float32, output_loading_info=True,
            quantization_config=transformers.Mxfp4Config(dequantize=True), **attn_kwargs())
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    model.eval()
    names = {n[: -len("_blocks")] for n in quantized if n.endswith("_blocks")}
    for name, t in model.state_dict().items():
        if name in names:
            assert t.dtype == torch.float32, (name, t.dtype)
            expect = convert_moe_packed_tensors(quantized[name + "_blocks"], quantized[name + "_scales"],
                                                dtype=torch.float32)
            assert torch.equal(t, expect), name
    assert names and names <= set(model.state_dict())
    return model, digest.hexdigest(), names


def runnable(model):
    """What runs on text: the model, or its submodule the spec's "run_module" names, where the
    wrapper's own forward fails though it only calls that module on text
    (Llama4ForConditionalGeneration in transformers 5.24 reads outputs.image_outputs, which its
    language model's MoeCausalLMOutputWithPast lacks)."""
    return getattr(model, RUN) if RUN else model


def fresh_model(hf_config, state: dict):
    """A new f32 model holding `state` (no state such as dynamic rope caches carries over)."""
    model = new_model(CLASS, hf_config)
    model.load_state_dict(state)
    model.eval()
    return runnable(model)


def teacher_forced_logits(hf_config, state: dict, ids: list[int]):
    """The logits [T, vocab] and, for a mixture of experts, its routes (record_routes)."""
    model = fresh_model(hf_config, state)
    with torch.no_grad(), module_outputs.record_routes(model) as routes:
        logits = model(torch.tensor([ids])).logits[0].float().numpy()
    return logits, routes


def greedy(hf_config, state: dict, prompt: list[int], eos: set[int]):
    """32 greedy tokens, their top-1 minus top-2 margins, and the raw logits of the first
    DECODE_ROWS steps (before any logits processor: a cache fault that moves them without
    flipping a greedy token shows there)."""
    with torch.no_grad():
        # An explicit all-ones attention mask: otherwise transformers masks prompt tokens
        # equal to the pad id.
        gen = fresh_model(hf_config, state).generate(
            torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=32, do_sample=False, eos_token_id=sorted(eos) or None,
            pad_token_id=sorted(eos)[0] if eos else None, output_scores=True,
            output_logits=True, return_dict_in_generate=True, use_cache=True)
    tokens = gen.sequences[0, len(prompt):].tolist()
    margins = []
    for s in gen.scores:
        top2 = torch.topk(s[0].float(), 2).values
        margins.append(float(top2[0] - top2[1]))
    decode_logits = torch.stack([x[0].float() for x in gen.logits[:DECODE_ROWS]]).numpy()
    return tokens, margins, decode_logits


class VisionTowerStandIn(torch.nn.Module):
    """In place of Gemma3n's timm vision tower: one convolution under timm_model."""

    def __init__(self, config):
        super().__init__()
        self.timm_model = torch.nn.Module()
        self.timm_model.conv_stem = torch.nn.Conv2d(3, config.hidden_size, 3, bias=False)


def stand_in_vision_tower(enabled: bool):
    """Makes Gemma3nModel build VisionTowerStandIn for its vision config while `enabled`."""
    from transformers.models.gemma3n import modeling_gemma3n

    auto = getattr(modeling_gemma3n, "RealAutoModel", modeling_gemma3n.AutoModel)
    modeling_gemma3n.RealAutoModel = auto

    class AutoModel:
        @staticmethod
        def from_config(config, **kwargs):
            if isinstance(config, transformers.Gemma3nVisionConfig):
                return VisionTowerStandIn(config)
            return auto.from_config(config, **kwargs)

    modeling_gemma3n.AutoModel = AutoModel if enabled else auto


CLASS = transformers.AutoModelForCausalLM  # model_class() of the spec being built
ATTN = None  # its "attn_implementation"
RUN = None  # its "run_module"
def build(spec_path: pathlib.Path, out_root: pathlib.Path) -> dict:
    global CLASS, ATTN, RUN
    spec = json.loads(spec_path.read_text())
    CLASS = model_class(spec)
    ATTN = spec.get("attn_implementation")
    RUN = spec.get("run_module")
    stand_in_vision_tower(spec.get("vision_tower_stand_in", False))
    name = spec_path.stem
    out = out_root / name
    out.mkdir(parents=True, exist_ok=True)
    config = spec["config"]
    gen_config = spec.get("generation_config", {})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(gen_config, indent=2) + "\n")

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "config.json").write_text(json.dumps(config))
        hf_config = transformers.AutoConfig.from_pretrained(tmp)
    model = new_model(CLASS, hf_config)
    model.eval()

    seed = spec["seed"]
    state = {n: list(t.shape) for n, t in model.state_dict().items()}
    tied = getattr(hf_config, "tie_word_embeddings", False)
    # transformers 5 holds some weights in another layout than checkpoints publish (the experts
    # of a mixture as 3-D tensors, where Mixtral's files have one tensor per expert), and
    # converts them on load and back on save. The weights are then generated under the names
    # and shapes save_pretrained writes, and loaded through from_pretrained.
    saved_dtypes = {}
    saved = saved_tensors(model, saved_dtypes)
    published_layout = set(saved) != set(state) - ({"lm_head.weight"} if tied else set())
    if published_layout:
        state = saved
    # The input embedding by its own name (model.embed_tokens, transformer.wte, ...), and the
    # weights of transformers Conv1D layers, stored [in, out] (GPT-2).
    params = dict(model.named_parameters(remove_duplicate=False))
    embed_name = next(n for n, p in params.items() if p is model.get_input_embeddings().weight
                      and n != "lm_head.weight")
    if published_layout and embed_name not in state:
        # A multimodal wrapper saved in its published layout (language_model.model.*, or
        # model.* beside visual.*): the embedding under that name.
        suffix = "." + ".".join(embed_name.split(".")[-2:])
        shape = list(params[embed_name].shape)
        names = [n for n, s in state.items() if n.endswith(suffix) and s == shape]
        assert len(names) == 1, names
        embed_name = names[0]
    conv1d = {f"{m}.weight" for m, mod in model.named_modules()
              if isinstance(mod, Conv1D)}
    entries, new_state = [], {}
    buffers = model.state_dict()
    for tname, shape in state.items():
        if tied and tname == "lm_head.weight":
            continue
        if not shape:
            # Scalar buffers (XIELUActivation beta, eps) keep the value the model gave them.
            center, scale = float(buffers[tname]), 0.0
        else:
            # Conv1D weights are rated by their fan-in, shape[0].
            center, scale = weightgen.init_rule(tname, shape[::-1] if tname in conv1d else shape)
        if tname == embed_name:
            center, scale = weightgen.init_rule("embed_tokens.weight", shape)
            scale = spec.get("embed_scale", scale)
        # "init": {"name suffix": [center, scale]} overrides the rule, e.g. a narrow embedding
        # LayerNorm where embed_scale cannot narrow what the residual stream starts from.
        for suffix, (c, sc) in spec.get("init", {}).items():
            if tname.endswith(suffix):
                center, scale = c, sc
        entry = {"name": tname, "shape": shape, "center": center, "scale": scale}
        values = weightgen.generate(seed, tname, shape, center, scale)
        if published_layout and saved_dtypes.get(tname, "F32") in ("I64", "I32"):
            # An integer table (DeepseekV4's hash router tid2eid: token -> expert ids), stored
            # as I32: floor of the generated values (its "init" keeps them in range).
            entry["dtype"] = "I32"
            values = np.floor(values).astype(np.int32)
        entries.append(entry)
        new_state[tname] = torch.from_numpy(values)
    if published_layout:
        model = load_published(CLASS, config, new_state)
    else:
        missing, unexpected = model.load_state_dict(new_state, strict=False)
        assert not unexpected, unexpected
        assert set(missing) <= {"lm_head.weight"} and (tied or not missing), missing
    if tied:
        model.tie_weights()
        assert torch.equal(model.lm_head.weight, model.get_input_embeddings().weight)
        assert torch.equal(model.lm_head.weight, new_state[embed_name])
    fp8_digest, fp8_names, mxfp4_digest = None, set(), None
    if fp8_block(config):
        model, fp8_digest, fp8_names = load_fp8(config, model.state_dict(), fp8_block(config))
    if mxfp4_fixture(config):
        # The dequantized experts are exact in bf16 and f16 too (E2M1 values times powers of
        # two in range), kept as they are below like FP8's.
        model, mxfp4_digest, fp8_names = load_mxfp4(config, model.state_dict())
    (out / "weights.json").write_text(
        json.dumps({"seed": seed, "generator": "splitmix64-fnv1a-v1", "tensors": entries}, indent=1)
        + "\n")

    vocab = hf_config.get_text_config().vocab_size
    eos = gen_config.get("eos_token_id", [])
    eos = set(eos if isinstance(eos, list) else [eos])
    tf_ids = counter_ids(seed + 1, spec.get("teacher_forced_length", 24), vocab, eos)
    prompt = counter_ids(seed + 2, spec.get("prompt_length", 8), vocab, eos)

    with torch.no_grad():
        run = runnable(model)
        with module_outputs.record(run) as inside, module_outputs.record_routes(run) as routes:
            res = run(torch.tensor([tf_ids]), output_hidden_states=True)
        logits = res.logits[0].float().numpy()
        states = [module_outputs.batch_row(h, config["architectures"][0]) for h in res.hidden_states]
        state_names, states = module_outputs.state_names(config["architectures"][0], states)
        # Each layer's attention and MLP module outputs, before the layer's own output.
        state_names, states = module_outputs.ordered_states(state_names, states, inside)
        hidden = torch.stack(states).float().numpy()
    new_tokens, margins, decode_logits = greedy(hf_config, model.state_dict(), prompt, eos)
    if "model_class" in spec:
        # The wrapper's text output is what AutoModelForCausalLM makes of the same checkpoint
        # (transformers maps a multimodal config to the text model's causal LM).
        # Wrappers that AutoModelForCausalLM does not map (Llava, Qwen2-VL, Mistral3) are
        # checked through AutoModelForImageTextToText: the saved checkpoint reloads to the same
        # text output.
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            try:
                causal = transformers.AutoModelForCausalLM.from_pretrained(
                    tmp, dtype=torch.float32, **attn_kwargs())
            except ValueError:
                causal = transformers.AutoModelForImageTextToText.from_pretrained(
                    tmp, dtype=torch.float32, **attn_kwargs())
        with torch.no_grad():
            causal_logits = causal(torch.tensor([tf_ids])).logits[0].float().numpy()
        assert np.array_equal(causal_logits, logits), type(causal).__name__
    tf_margins = [float(v[0] - v[1]) for v in torch.topk(torch.from_numpy(logits), 2).values]
    tensors = {"logits": logits, "hidden_states": hidden, "decode_logits": decode_logits}
    # The same model with every tensor rounded to bf16 (f16) and computed in f32: what lathe
    # computes from a bf16 (f16) checkpoint, so those runs are held to f32 tolerances.
    rounded = {}
    for tag, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        # An FP8 checkpoint's other tensors in f16 compute in f32, its dequantized matrices
        # included (in bf16 they are rounded to bf16 like the rest).
        state = {n: t if tag == "f16" and n in fp8_names else t.to(dtype).float()
                 for n, t in model.state_dict().items()}
        tensors[f"logits_{tag}"], tag_routes = teacher_forced_logits(hf_config, state, tf_ids)
        if tag_routes:
            tensors[f"route_ids_{tag}"] = torch.stack([r[1] for r in tag_routes]).numpy()
            tensors[f"route_weights_{tag}"] = torch.stack([r[2] for r in tag_routes]).numpy()
        tokens, tag_margins, tensors[f"decode_logits_{tag}"] = greedy(hf_config, state, prompt, eos)
        rounded[tag] = {"greedy_tokens": tokens, "greedy_margins": tag_margins}
    if routes:
        # Each MoE layer's experts for every teacher-forced token, in the router's order, and
        # their weights: [moe layers, T, k].
        tensors["route_ids"] = torch.stack([r[1] for r in routes]).numpy()
        tensors["route_weights"] = torch.stack([r[2] for r in routes]).numpy()
    save_file(tensors, str(out / "goldens.safetensors"))
    summaries = [{"mean": float(h.mean()), "rms": float(np.sqrt((h.astype(np.float64) ** 2).mean())),
                  "absmax": float(np.abs(h).max())} for h in hidden]
    golden = {
        "format": GOLDEN_FORMAT,
        "architecture": config["architectures"][0],
        "made_by": {"transformers": transformers.__version__, "torch": torch.__version__,
                    "dtype": "float32", "device": "cpu",
                    **({"attn_implementation": ATTN} if ATTN else {})},
        "teacher_forced_ids": tf_ids,
        "teacher_forced_min_margin": min(tf_margins),
        "prompt_ids": prompt,
        "greedy_tokens": new_tokens,
        "greedy_margins": margins,
        "hidden_state_names": state_names,
        "hidden_state_summaries": summaries,
        "rounded_weights": rounded,
    }
    if routes:
        golden["route_names"] = [r[0] for r in routes]
    if fp8_digest:
        golden["fp8_sha256"] = fp8_digest
    if mxfp4_digest:
        golden["mxfp4_sha256"] = mxfp4_digest
    (out / "goldens.json").write_text(json.dumps(golden, indent=1) + "\n")
    return {"name": name, "min_greedy_margin": min(margins), "tokens": len(new_tokens),
            "min_tf_margin": min(tf_margins)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="build only this config name")
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/tiny"))
    args = ap.parse_args()
    specs = sorted((HERE / "configs").glob("*.json"))
    if args.only:
        specs = [s for s in specs if s.stem == args.only]
        if not specs:
            print(f"no config named {args.only}", file=sys.stderr)
            return 1
    for spec in specs:
        print(json.dumps(build(spec, pathlib.Path(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
