#include "models/registry.h"

#include "core/error.h"
#include "models/engine.h"

namespace lathe {

// The loaders, one per model file (src/models/<arch>.cpp). Adding an architecture adds its
// declaration here and its line to the table below.
std::unique_ptr<Model> load_llama(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_mistral(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_granite(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_arcee(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_seed_oss(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_ernie4_5(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_smollm3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_olmo2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_phi3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_starcoder2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_opt(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt_bigcode(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_bloom(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_falcon(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt_neox(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gptj(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_phi(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_stablelm(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_olmo(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_cohere(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_glm4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_exaone4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_apertus(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_mixtral(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen2_moe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen3_moe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_olmoe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_granitemoe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_glm4_moe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_deepseek_v3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_deepseek_v2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_glm4_moe_lite(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_glm_moe_dsa(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_deepseek_v32(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_ernie4_5_moe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen3_next(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_lfm2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_lfm2_moe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen3_5(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_qwen3_5_moe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_olmo3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_cohere2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_ministral3(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gpt_oss(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_deepseek_v4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_mamba2(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_granitemoehybrid(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_nemotron_h(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_falcon_h1(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_phimoe(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_llama4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_multimodal_text(const Checkpoint&, const ModelOptions&,
                                            const char* default_text_type);
std::unique_ptr<Model> load_mllama_text(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma4(const Checkpoint&, const ModelOptions&);
std::unique_ptr<Model> load_gemma3n(const Checkpoint&, const ModelOptions&);

const std::vector<ArchitectureEntry>& architectures() {
  static const std::vector<ArchitectureEntry> table = {
      {"LlamaForCausalLM", "llama", load_llama,
       "the reference decoder: RMSNorm, rotary GQA, SwiGLU; every rope scaling kind"},
      {"MistralForCausalLM", "mistral", load_mistral, "Llama with a sliding window on every layer"},
      {"Qwen2ForCausalLM", "qwen2", load_qwen2,
       "Llama with q/k/v biases and Qwen sliding-window layers"},
      {"Qwen3ForCausalLM", "qwen3", load_qwen3, "Qwen2 with per-head q/k RMSNorm"},
      {"GemmaForCausalLM", "gemma", load_gemma,
       "Llama with (1 + w) RMSNorm, sqrt(hidden) embedding scale, tanh-GELU MLP"},
      {"Gemma2ForCausalLM", "gemma2", load_gemma2,
       "sandwich norms, alternating sliding/full layers, attention and final soft-capping"},
      {"GraniteForCausalLM", "granite", load_granite,
       "Llama with embedding, attention, residual and logits multipliers"},
      {"SmolLM3ForCausalLM", "smollm3", load_smollm3,
       "Llama with rotary skipped on no_rope_layers, optional sliding window"},
      {"Olmo2ForCausalLM", "olmo2", load_olmo2, "post-norm block, q/k RMSNorm across heads"},
      {"Phi3ForCausalLM", "phi3", load_phi3,
       "Llama with fused qkv_proj and gate_up_proj (split at load), partial rotary, longrope "
       "(the cache rebuilt where it turns long)"},
      {"Starcoder2ForCausalLM", "starcoder2", load_starcoder2,
       "LayerNorm with bias, GELU MLP c_fc/c_proj, biases, sliding window"},
      {"Gemma3ForCausalLM", "gemma3_text", load_gemma3,
       "Gemma2 block with per-head q/k norms, 5:1 sliding/full layers, local and global rotary"},
      {"ArceeForCausalLM", "arcee", load_arcee,
       "Llama with an ungated ReLU-squared MLP (up_proj, down_proj)"},
      {"SeedOssForCausalLM", "seed_oss", load_seed_oss,
       "Llama with q/k/v biases apart from the output bias, head_dim 128 by default"},
      {"Ernie4_5ForCausalLM", "ernie4_5", load_ernie4_5,
       "Llama with interleaved rotary pairs and one use_bias switch for every projection"},
      {"GPT2LMHeadModel", "gpt2", load_gpt2,
       "learned positions, LayerNorm, fused c_attn, Conv1D weights (transposed at load), gelu_new"},
      {"GPTBigCodeForCausalLM", "gpt_bigcode", load_gpt_bigcode,
       "GPT-2 block with nn.Linear weights and multi-query attention (multi_query)"},
      {"OPTForCausalLM", "opt", load_opt,
       "learned positions (offset 2), pre- or post-LayerNorm, ReLU MLP, project_in/project_out"},
      {"BloomForCausalLM", "bloom", load_bloom,
       "ALiBi, embedding LayerNorm, per-head fused query_key_value, residual-after-norm switch"},
      {"FalconForCausalLM", "falcon", load_falcon,
       "parallel attention + MLP (new_decoder_architecture or parallel_attn), MQA/GQA fused QKV, "
       "rotary or ALiBi"},
      {"GPTNeoXForCausalLM", "gpt_neox", load_gpt_neox,
       "LayerNorm blocks, parallel or sequential residual, per-head fused qkv, partial rotary"},
      {"GPTJForCausalLM", "gptj", load_gptj,
       "parallel attention + MLP off one LayerNorm, interleaved partial rotary, lm_head bias"},
      {"PhiForCausalLM", "phi", load_phi,
       "parallel attention + MLP off one LayerNorm, partial rotary, optional q/k LayerNorm"},
      {"StableLmForCausalLM", "stablelm", load_stablelm,
       "LayerNorm blocks, optional parallel residual, per-head q/k LayerNorm, partial rotary"},
      {"OlmoForCausalLM", "olmo", load_olmo,
       "Llama with parameter-free LayerNorms and optional q/k/v clipping (clip_qkv)"},
      {"CohereForCausalLM", "cohere", load_cohere,
       "parallel block, bias-free LayerNorm, interleaved rotary, per-head q/k norm, logit_scale"},
      {"Glm4ForCausalLM", "glm4", load_glm4,
       "sandwich RMSNorms, interleaved partial rotary, q/k/v biases, fused gate_up_proj"},
      {"Exaone4ForCausalLM", "exaone4", load_exaone4,
       "post-norm block, per-head q/k RMSNorm, sliding/full layers with rotary on sliding only"},
      {"ApertusForCausalLM", "apertus", load_apertus,
       "Llama with per-head q/k RMSNorm, ungated xIELU MLP with learned alphas, llama3 rotary"},
      {"MixtralForCausalLM", "mixtral", load_mixtral,
       "Mistral with a mixture of experts: softmax router, top-k renormalised (w1/w2/w3)"},
      {"Qwen2MoeForCausalLM", "qwen2_moe", load_qwen2_moe,
       "Qwen2 with experts on sparse layers and a sigmoid-gated shared expert"},
      {"Qwen3MoeForCausalLM", "qwen3_moe", load_qwen3_moe,
       "Qwen3 with experts on sparse layers (decoder_sparse_step, mlp_only_layers)"},
      {"OlmoeForCausalLM", "olmoe", load_olmoe,
       "Llama with q/k RMSNorm across heads, clip_qkv after them, experts on every layer"},
      {"GraniteMoeForCausalLM", "granitemoe", load_granitemoe,
       "Granite with experts in 3-D tensors, softmax over the top-k router logits"},
      {"Glm4MoeForCausalLM", "glm4_moe", load_glm4_moe,
       "partial rotary, q/k/v biases; sigmoid grouped router with correction bias, shared "
       "experts, dense first layers"},
      {"DeepseekV3ForCausalLM", "deepseek_v3", load_deepseek_v3,
       "multi-head latent attention (compressed latent cache), sigmoid grouped router with "
       "correction bias, shared experts, dense first layers"},
      {"DeepseekV2ForCausalLM", "deepseek_v2", load_deepseek_v2,
       "multi-head latent attention (compressed latent cache), softmax router (greedy or "
       "group-limited), shared experts"},
      {"Glm4MoeLiteForCausalLM", "glm4_moe_lite", load_glm4_moe_lite,
       "DeepSeek-V3's latent attention with Glm4Moe's experts; dense layers by mlp_layer_types"},
      {"GlmMoeDsaForCausalLM", "glm_moe_dsa", load_glm_moe_dsa,
       "DeepSeek-V3's latent attention and experts with DeepSeek sparse attention: an indexer "
       "(own projections, cached keys) chooses index_topk keys per query; layers may share an "
       "earlier layer's choice (indexer_types)"},
      {"DeepseekV32ForCausalLM", "deepseek_v32", load_deepseek_v32,
       "GlmMoeDsa's sparse attention with the indexer rotating half-split; every layer runs "
       "its indexer"},
      {"Ernie4_5_MoeForCausalLM", "ernie4_5_moe", load_ernie4_5_moe,
       "Ernie4_5 with experts: softmax router chosen with moe_statics' bias, shared experts, "
       "moe_layer_start/end/interval (use_bias false)"},
      {"Qwen3NextForCausalLM", "qwen3_next", load_qwen3_next,
       "hybrid: Gated DeltaNet linear attention (recurrent state) and gated full attention, "
       "partial rotary, (1 + w) norms; experts with a gated shared expert"},
      {"Qwen3_5ForCausalLM", "qwen3_5_text", load_qwen3_5,
       "Qwen3Next's hybrid decoder with separate linear-attention projections, dense MLP"},
      {"Qwen3_5ForConditionalGeneration", "qwen3_5", load_qwen3_5,
       "the text model of the multimodal checkpoint (text_config, model.language_model.); "
       "the vision tower is not loaded"},
      {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", load_qwen3_5_moe,
       "Qwen3.5 with experts on every layer and a gated shared expert"},
      {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", load_qwen3_5_moe,
       "the text model of the multimodal checkpoint; the vision tower is not loaded"},
      {"Olmo3ForCausalLM", "olmo3", load_olmo3,
       "Olmo2's post-norm block with sliding/full layers and a rotary schedule per layer type"},
      {"Cohere2ForCausalLM", "cohere2", load_cohere2,
       "Cohere's parallel block without q/k norms, sliding/full layers, rotary on sliding only"},
      {"Ministral3ForCausalLM", "ministral3", load_ministral3,
       "Mistral with Llama 4's position scale on the queries (llama_4_scaling_beta); yarn by "
       "default"},
      {"GptOssForCausalLM", "gpt_oss", load_gpt_oss,
       "attention sinks, q/k/v/o biases, sliding/full layer_types, yarn; biased router (softmax "
       "over the top-k), expert biases, clamped SwiGLU on interleaved gate/up columns; MXFP4 "
       "experts run by their own kernels (or dequantized at load: --mxfp4 dequantize)"},
      {"Mamba2ForCausalLM", "mamba2", load_mamba2,
       "Mamba2 SSM layers: causal conv over xBC, the selective scan (Ssd op) with its state, "
       "gated RMSNorm per group; backbone.* names, tie_word_embeddings"},
      {"GraniteMoeHybridForCausalLM", "granitemoehybrid", load_granitemoehybrid,
       "Granite's multipliers; Mamba2 or attention layers (layer_types), experts (softmax over "
       "the top-k logits) plus a shared MLP; rotary only with position_embedding_type rope"},
      {"NemotronHForCausalLM", "nemotron_h", load_nemotron_h,
       "one mixer per layer by layers_block_type or hybrid_override_pattern: Mamba2, attention "
       "without rotary, relu2 MLP, or ungated experts with a grouped sigmoid router and a "
       "shared expert"},
      {"FalconH1ForCausalLM", "falcon_h1", load_falcon_h1,
       "a Mamba2 mixer and rotary attention side by side in every layer (both states kept), "
       "muP multipliers on embeddings, logits, keys, branches, in_proj sections and the MLP; "
       "the mixer's norm before, after or without its gate"},
      {"PhimoeForCausalLM", "phimoe", load_phimoe,
       "Mixtral's block with LayerNorms, attention and lm_head biases, the sparsemixer router "
       "(top 2, each weighted by a softmax over the logits near it), longrope with short and "
       "long mscale"},
      {"Llama4ForCausalLM", "llama4_text", load_llama4,
       "chunked attention on the rotary layers (interleaved pairs, L2-normed q/k), NoPE layers "
       "with full attention and the queries' temperature tuning, dense and MoE layers: a top-k "
       "router whose sigmoid scales the expert's input, beside a shared expert"},
      // The text models of multimodal checkpoints (models/arch/multimodal.cpp).
      {"Gemma3ForConditionalGeneration", "gemma3",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "gemma3_text");
       },
       "the text model (Gemma3ForCausalLM) of the multimodal checkpoint; the SigLIP tower and "
       "projector are not loaded"},
      {"Qwen2VLForConditionalGeneration", "qwen2_vl",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "qwen2_vl_text");
       },
       "the text model (a Qwen2 decoder; its multimodal rotary is the default one on text) of "
       "the multimodal checkpoint; the vision tower is not loaded"},
      {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "qwen2_5_vl_text");
       },
       "the text model (a Qwen2 decoder; its multimodal rotary is the default one on text) of "
       "the multimodal checkpoint; the vision tower is not loaded"},
      {"LlavaForConditionalGeneration", "llava",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "llama");
       },
       "the text model (text_config's causal LM) of the multimodal checkpoint; the CLIP tower "
       "and projector are not loaded"},
      {"Mistral3ForConditionalGeneration", "mistral3",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "mistral");
       },
       "the text model (text_config's causal LM) of the multimodal checkpoint; the Pixtral "
       "tower and projector are not loaded"},
      {"LlavaOnevisionForConditionalGeneration", "llava_onevision",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "qwen2");
       },
       "the text model (text_config's causal LM) of the multimodal checkpoint; the SigLIP tower "
       "and projector are not loaded"},
      {"InternVLForConditionalGeneration", "internvl",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "qwen2");
       },
       "the text model (text_config's causal LM) of the multimodal checkpoint; the InternViT "
       "tower and projector are not loaded"},
      {"Idefics3ForConditionalGeneration", "idefics3",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "llama");
       },
       "the text model (text_config's causal LM, under model.text_model.) of the multimodal "
       "checkpoint; the vision tower and connector are not loaded"},
      {"MllamaForConditionalGeneration", "mllama", load_mllama_text,
       "the text model on text alone: a Llama decoder of the layers that are not cross-attention "
       "(those MllamaTextModel skips without an image), an embedding of vocab_size + 8 rows; the "
       "vision model and projector are not loaded"},
      {"Llama4ForConditionalGeneration", "llama4",
       [](const Checkpoint& c, const ModelOptions& o) {
         return load_multimodal_text(c, o, "llama4_text");
       },
       "the text model (Llama4ForCausalLM) of the multimodal checkpoint; the vision model and "
       "projector are not loaded (transformers 5.24's own forward of the wrapper fails on text; "
       "checked against its language_model)"},
      {"Lfm2ForCausalLM", "lfm2", load_lfm2,
       "hybrid: short gated convolution layers (B * x, causal conv state, C * out) beside "
       "attention with per-head q/k norms; SwiGLU sized by block_auto_adjust_ff_dim"},
      {"Gemma4ForCausalLM", "gemma4_text", load_gemma4,
       "sandwich norms, sliding/full layers with their own head size and kv heads, values = "
       "keys on full layers, proportional rotary, per-layer embeddings, KV shared across "
       "layers, experts beside the MLP (router scaled per expert)"},
      {"Gemma4ForConditionalGeneration", "gemma4", load_gemma4,
       "the text model of the multimodal checkpoint (text_config, model.language_model.); "
       "the vision and audio towers are not loaded"},
      {"Gemma3nForCausalLM", "gemma3n_text", load_gemma3n,
       "AltUp streams (predicted, corrected, projected back), Laurel low-rank residual, "
       "per-layer embeddings, KV shared across layers, Gaussian top-k activation sparsity, "
       "q/k/v norms, sliding/full rotary"},
      {"Gemma3nForConditionalGeneration", "gemma3n", load_gemma3n,
       "the text model of the multimodal checkpoint (text_config, model.language_model.) with "
       "the hard-token embedders of the vision and audio ids; the vision and audio towers are "
       "not loaded"},
      {"DeepseekV4ForCausalLM", "deepseek_v4", load_deepseek_v4,
       "hyper-connections (hc_mult streams mixed by Sinkhorn-normalised weights); shared-KV "
       "attention over a sliding window plus the HCA / CSA compressors' entries in one softmax "
       "with sinks (CSA: those its indexer picks), the output's rotary undone, grouped output "
       "projection; sqrtsoftplus and hash routers, clamped SwiGLU experts and shared expert"},
      {"Lfm2MoeForCausalLM", "lfm2_moe", load_lfm2_moe,
       "LFM2's hybrid decoder with experts past num_dense_layers: sigmoid router, expert_bias "
       "moves the choice, weights renormalised and scaled"},
  };
  return table;
}

const std::vector<PlannedArchitecture>& planned_architectures() {
  static const std::vector<PlannedArchitecture> table = {};
  return table;
}

const PlannedArchitecture* find_planned_architecture(const std::string& name) {
  for (const auto& e : planned_architectures())
    if (name == e.name) return &e;
  return nullptr;
}

const ArchitectureEntry* find_architecture(const std::string& name) {
  for (const auto& e : architectures())
    if (name == e.name) return &e;
  return nullptr;
}

std::unique_ptr<Model> load_model(const Checkpoint& ckpt, const ModelOptions& opts) {
  const std::string arch = ckpt.architecture();
  if (arch.empty())
    fail(ckpt.config_path(), ": field \"architectures\" is missing or not a list of names");
  const ArchitectureEntry* e = find_architecture(arch);
  if (!e) {
    std::string known;
    for (const auto& a : architectures())
      known += (known.empty() ? "" : ", ") + std::string(a.name);
    fail(ckpt.config_path(), ": field \"architectures\" names ", arch,
         ", which lathe does not support (supported: ", known, ")");
  }
  Checkpoint source = ckpt;  // what the loader reads: mapped tensors copied, or kept as views
  source.set_copy_views(opts.copy_weights && !opts.quantize && !opts.wrap);
  std::unique_ptr<Model> model = e->load(source, opts);
  // Wrapped first: a sharded rank quantizes only its own slices and experts.
  if (opts.wrap) model = opts.wrap(std::move(model));
  if (opts.quantize) {
    auto* graph_model = dynamic_cast<GraphModel*>(model.get());
    if (!graph_model) fail("internal: ", arch, " builds no graph to quantize");
    graph_model->quantize_weights(*opts.quantize);
  }
  return model;
}

}  // namespace lathe
