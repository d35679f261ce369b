// What the engine tests share: tiny fixtures built and loaded, token ids, bit equality, and the
// fixtures that cover the architectures built on the engine.
#pragma once

#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/quant.h"
#include "io/tiny_checkpoint.h"
#include "models/engine.h"
#include "models/registry.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

// A tiny checkpoint built from a fixture, loaded.
struct Loaded {
  testing::ScratchDir dir{"engine"};
  std::unique_ptr<Model> model;
  const GraphModel& graph() const {
    const auto* g = dynamic_cast<const GraphModel*>(model.get());
    if (!g) throw std::runtime_error("not a graph model");
    return *g;
  }
};

// `name` may end in @q8_0 or @q4_0: the fixture with its matrices quantized at load.
// copy_weights: ModelOptions::copy_weights.
std::unique_ptr<Loaded> load(const std::string& name, DType storage = DType::F32,
                             bool copy_weights = false) {
  auto l = std::make_unique<Loaded>();
  const size_t at = name.find('@');
  build_tiny_checkpoint(testing::fixture_dir(name.substr(0, at)), l->dir.path(),
                        {.dtype = storage});
  const Checkpoint ckpt = Checkpoint::open(l->dir.path());
  ModelOptions options{.copy_weights = copy_weights};
  if (at != std::string::npos) options.quantize = quant_type_from_name(name.substr(at + 1));
  l->model = load_model(ckpt, options);
  return l;
}

std::vector<int32_t> ids(int64_t n, int64_t vocab, int32_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((seed * 7919 + i * 104729) % vocab);
  return v;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<void>(), b.data<void>(), a.nbytes()) == 0;
}

// The architectures built on the engine that these tests cover, one fixture each.
inline const std::vector<std::string> kFixtures = {
    "llama_tied_gqa",
    "mistral_window",
    "qwen2_sliding",
    "qwen3_untied_headdim_yarn",
    "gemma_tied",
    "granite_multipliers",
    "llama_dynamic",
    "smollm3_untied_sliding",
    "gemma2_softcap_window",
    "gemma3_text_untied_softcap",
    "gpt2_tied",
    "opt_tied_prenorm",
    "bloom_tied_alibi6",
    "falcon_alibi_sequential_bias",
    "falcon_new_arch_gqa",
    "phi3_tied_partial_longrope",
    "phi3_longrope_cross",  // the cache rebuilt where longrope turns long, mid-batch
    "gptj_untied_rotary8",
    "olmo_untied_clip_gqa",
    "cohere_tied_qknorm_gqa",
    "starcoder2_tied_window_bias",
    "stablelm_parallel_qknorm_bias",
    "exaone4_untied_sliding_pattern",
    "apertus_tied_bias_default_rope",
    "gpt_neox_parallel_untied",
    "qwen3_next_moe_hybrid",  // recurrent (Gated DeltaNet) and full-attention layers
    "qwen3_5_dense_interval3_tied",
    "olmo3_untied_sliding_linear",
    "cohere2_tied_sliding_pattern",
    "ministral3_untied_yarn_llama4_scale",  // queries scaled by position: batched segments
    "gpt_oss_sliding_yarn_defaults",        // attention sinks, sliding rings, biased experts
    "llama4_chunked_nope_moe_llama3",       // chunked rings, NoPE layers' query temperature
    "mamba2_groups",                        // recurrent (SSM) layers only
    "lfm2_untied_bias_full_attn_idxs",      // short convolutions (state) beside attention
    "granitemoehybrid_dense_nope_tied",     // Mamba2 beside attention without rotary
    "falcon_h1_gate_then_norm_groups",      // KV and recurrent state in every layer
    "phimoe_biases_jitter",                 // sparsemixer routes, LayerNorms, lm_head bias
    "gemma4_text_kv_shared",                // layers attending over another layer's cache
    "gemma3n_text_kv_shared_sparse",        // AltUp streams, KV sharing, activation sparsity
    "gemma3n_multimodal_text",              // vision and audio ids through their embedders
    "glm_moe_dsa_shared_indexer_groups",    // sparse attention: index keys, shared choices
    "deepseek_v32_sparse_topk8_groups",     // sparse attention, half-split indexer rotary
};

}  // namespace
}  // namespace lathe
