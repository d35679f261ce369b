// Config values that change the computation and that lathe does not implement are errors
// naming the field, for the architectures whose config reading has such cases.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/tiny_checkpoint.h"
#include "models/registry.h"
#include "support/run.h"

namespace lathe {
namespace {
using Json = nlohmann::json;

// Builds `fixture`, applies `edit` to its config.json, loads it, and returns the error text
// (empty when it loaded).
std::string load_error(const std::string& fixture, const std::function<void(Json&)>& edit) {
  testing::ScratchDir dir("config");
  build_tiny_checkpoint(testing::fixture_dir(fixture), dir.path(), {});
  Json c = Json::parse(testing::read_file(dir.path() / "config.json"));
  edit(c);
  testing::write_file(dir.path() / "config.json", c.dump());
  try {
    load_model(Checkpoint::open(dir.path()), {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& fixture, const std::function<void(Json&)>& edit,
                  const std::string& message) {
  const std::string err = load_error(fixture, edit);
  EXPECT_NE(err.find(message), std::string::npos)
      << fixture << ": expected \"" << message << "\" in: " << err;
}

TEST(ConfigErrors, Activations) {
  expect_error(
      "gemma_tied", [](Json& c) { c["hidden_act"] = "quick_gelu"; },
      "field \"hidden_act\" is \"quick_gelu\"");
  expect_error(
      "gemma2_softcap_window", [](Json& c) { c["hidden_activation"] = "quick_gelu"; },
      "field \"hidden_activation\" is \"quick_gelu\"");
  expect_error(
      "starcoder2_untied_nobias_gelu", [](Json& c) { c["hidden_act"] = "quick_gelu"; },
      "field \"hidden_act\" is \"quick_gelu\"");
  // GemmaConfig maps the legacy "gelu" to the tanh approximation: it loads.
  EXPECT_EQ(load_error("gemma_tied", [](Json& c) { c["hidden_act"] = "gelu"; }), "");
}

// Mixture-of-experts fields that cannot describe the checkpoint are errors naming the field,
// before anything is sized by them.
TEST(ConfigErrors, MixturesOfExperts) {
  expect_error(
      "mixtral_untied_window_top2", [](Json& c) { c["num_experts_per_tok"] = 9; },
      "field \"num_experts_per_tok\" is 9, more than the 5 experts (\"num_local_experts\")");
  expect_error(
      "qwen3_moe_headdim_mlp_only", [](Json& c) { c["num_experts"] = 1000000000; },
      "field \"num_experts\" is 1000000000, but the checkpoint holds");
  expect_error(
      "qwen2_moe_sparse_step_norm", [](Json& c) { c["decoder_sparse_step"] = 0; },
      "field \"decoder_sparse_step\" is 0");
  expect_error(
      "qwen2_moe_shared_mlp_only", [](Json& c) { c["mlp_only_layers"] = {7}; },
      "mlp_only_layers holds 7, not a layer of 3");
  expect_error(
      "deepseek_v3_mla_lora_groups", [](Json& c) { c["n_group"] = 3; },
      "8 experts in n_group 3 groups");
  expect_error(
      "glm4_moe_groups_shared_dense", [](Json& c) { c["n_shared_experts"] = -1; },
      "field \"n_shared_experts\" is -1");
  expect_error(
      "deepseek_v2_lite_greedy", [](Json& c) { c["topk_method"] = "noaux_tc"; },
      "field \"topk_method\" is \"noaux_tc\"");
  expect_error(
      "glm4_moe_lite_mla_layer_types", [](Json& c) { c["mlp_layer_types"] = {"dense"}; },
      "field \"mlp_layer_types\" must list 3 layer types");
  expect_error(
      "ernie4_5_moe_statics_shared", [](Json& c) { c["use_bias"] = true; },
      "field \"use_bias\" is true");
  expect_error(
      "granitemoe_multipliers", [](Json& c) { c["num_local_experts"] = 0; },
      "field \"num_local_experts\" is 0, out of range");
}

// DeepSeek sparse attention's indexer fields: each an error naming the field.
TEST(ConfigErrors, SparseAttentionIndexer) {
  expect_error(
      "glm_moe_dsa_shared_indexer_groups",
      [](Json& c) {
        c["indexer_types"] = {"shared", "full", "full", "shared"};
      },
      "layer 0 shares its indexer's keys, but no earlier layer has an indexer");
  expect_error(
      "glm_moe_dsa_shared_indexer_groups", [](Json& c) { c["indexer_types"][2] = "sparse"; },
      "indexer_types[2] is \"sparse\"");
  expect_error(
      "glm_moe_dsa_topk7_dense_first", [](Json& c) { c["index_head_dim"] = 6; },
      "field \"index_head_dim\" is 6, below qk_rope_head_dim (8)");
  expect_error(
      "deepseek_v32_sparse_topk8_groups", [](Json& c) { c["index_topk"] = 0; },
      "field \"index_topk\" is 0");
  // GlmMoeDsaConfig's pattern letters give the same layers as indexer_types.
  EXPECT_EQ(load_error("glm_moe_dsa_shared_indexer_groups",
                       [](Json& c) {
                         c.erase("indexer_types");
                         c["index_topk_pattern"] = "FSFS";
                       }),
            "");
}

// Hybrid linear-attention fields: layer kinds lathe lacks, head counts that do not divide,
// sizes out of range, a malformed text_config; each an error naming the field.
TEST(ConfigErrors, HybridLinearAttention) {
  expect_error(
      "qwen3_next_moe_hybrid", [](Json& c) { c["layer_types"][1] = "mamba"; },
      "layer_types[1] is \"mamba\"; lathe implements linear_attention and full_attention");
  expect_error(
      "qwen3_next_moe_hybrid", [](Json& c) { c["layer_types"] = {"full_attention"}; },
      "field \"layer_types\" must list 4 layer types");
  expect_error(
      "qwen3_next_moe_hybrid", [](Json& c) { c["linear_num_value_heads"] = 5; },
      "linear_num_value_heads 5 is not a multiple of linear_num_key_heads 2");
  // 3 value heads of 3 key heads: divisible, but the checkpoint's tensors are for 1 key head.
  expect_error(
      "qwen3_5_dense_interval3_tied", [](Json& c) { c["linear_num_key_heads"] = 3; },
      "in_proj_qkv.weight");
  expect_error(
      "qwen3_5_dense_interval3_tied", [](Json& c) { c["linear_conv_kernel_dim"] = 0; },
      "field \"linear_conv_kernel_dim\" is 0, out of range");
  expect_error(
      "qwen3_5_dense_interval3_tied", [](Json& c) { c["full_attention_interval"] = 0; },
      "field \"full_attention_interval\" is 0, out of range");
  expect_error(
      "qwen3_5_multimodal_text", [](Json& c) { c["text_config"] = 7; },
      "field \"text_config\" must be an object");
}

TEST(ConfigErrors, GptOss) {
  expect_error(
      "gpt_oss_sliding_yarn_defaults", [](Json& c) { c["layer_types"] = {"full_attention"}; },
      "field \"layer_types\" must list 3 layer types");
  expect_error(
      "gpt_oss_tied_layer_types_clamped_nobias",
      [](Json& c) { c["layer_types"][1] = "chunked_attention"; },
      "layer_types[1] is \"chunked_attention\"");
  expect_error(
      "gpt_oss_sliding_yarn_defaults", [](Json& c) { c["num_experts_per_tok"] = 6; },
      "field \"num_experts_per_tok\" is 6, more than the 5 experts (\"num_local_experts\")");
  expect_error(
      "gpt_oss_sliding_yarn_defaults", [](Json& c) { c["sliding_window"] = nullptr; },
      "layer 0 is sliding_attention but field \"sliding_window\" is null");
  expect_error(
      "gpt_oss_sliding_yarn_defaults", [](Json& c) { c["sliding_window"] = 0; },
      "field \"sliding_window\" is 0; it must be positive");
  // Without sliding layers a null window is fine.
  EXPECT_EQ(load_error("gpt_oss_tied_layer_types_clamped_nobias",
                       [](Json& c) {
                         c["sliding_window"] = nullptr;
                         c["layer_types"] = {"full_attention", "full_attention", "full_attention"};
                       }),
            "");
  expect_error(
      "gpt_oss_sliding_yarn_defaults",
      [](Json& c) {
        c["quantization_config"] = {{"quant_method", "bitsandbytes"}};
      },
      "field \"quantization_config\" has quant_method \"bitsandbytes\"");
}

// Lfm2Config: layer types other than conv and full_attention, and convolution sizes lathe
// does not keep, are errors; block_ff_dim and tie_embedding override the fields they alias.
TEST(ConfigErrors, Lfm2) {
  expect_error(
      "lfm2_tied_conv_attn",
      [](Json& c) {
        c["layer_types"] = {"conv", "full_attention"};
      },
      "field \"layer_types\" must list 4 layer types");
  expect_error(
      "lfm2_tied_conv_attn", [](Json& c) { c["layer_types"][2] = "sliding_attention"; },
      "layer_types[2] is \"sliding_attention\"; lathe implements conv and full_attention");
  expect_error(
      "lfm2_untied_bias_full_attn_idxs", [](Json& c) { c["full_attn_idxs"] = 2; },
      "field \"full_attn_idxs\" must be a list");
  expect_error(
      "lfm2_untied_bias_full_attn_idxs", [](Json& c) { c["conv_L_cache"] = 0; },
      "field \"conv_L_cache\" is 0; lathe implements convolutions of 1 to 65 taps");
  expect_error(
      "lfm2_tied_conv_attn", [](Json& c) { c["block_multiple_of"] = 0; },
      "field \"block_multiple_of\" is 0");
  // full_attn_idxs picks the attention layers: another choice asks for other tensors.
  EXPECT_NE(
      load_error("lfm2_untied_bias_full_attn_idxs", [](Json& c) { c["full_attn_idxs"] = {0}; }),
      "");
  // block_ff_dim replaces intermediate_size (Lfm2Config.__post_init__) before Lfm2MLP's
  // adjustment: int(2 * 120 / 3) = 80, times 1.5, up to a multiple of 16: 128.
  EXPECT_EQ(load_error("lfm2_tied_conv_attn",
                       [](Json& c) {
                         c["intermediate_size"] = 7;
                         c["block_ff_dim"] = 120;
                       }),
            "");
  EXPECT_NE(load_error("lfm2_tied_conv_attn", [](Json& c) { c["block_ff_dim"] = 240; }), "");
  // A null multiplier skips the multiple and the rounding: 80 columns, not the checkpoint's.
  EXPECT_NE(
      load_error("lfm2_tied_conv_attn", [](Json& c) { c["block_ffn_dim_multiplier"] = nullptr; }),
      "");
  // tie_embedding false asks for the lm_head.weight the tied checkpoint lacks.
  expect_error(
      "lfm2_tied_conv_attn", [](Json& c) { c["tie_embedding"] = false; }, "lm_head.weight");
}

// Lfm2MoeConfig: layer_types has no default; the expert counts must describe the checkpoint.
TEST(ConfigErrors, Lfm2Moe) {
  expect_error(
      "lfm2_moe_expert_bias_dense2", [](Json& c) { c.erase("layer_types"); },
      "field \"layer_types\" is missing");
  expect_error(
      "lfm2_moe_expert_bias_dense2", [](Json& c) { c["num_experts_per_tok"] = 9; },
      "field \"num_experts_per_tok\" is 9, more than the 8 experts (\"num_experts\")");
  expect_error(
      "lfm2_moe_expert_bias_dense2", [](Json& c) { c["num_dense_layers"] = -1; },
      "field \"num_dense_layers\" is -1, out of range");
  // num_dense_layers picks the dense layers and use_expert_bias the bias tensors: other values
  // ask for tensors the checkpoint does not have, or leave some unused.
  EXPECT_NE(load_error("lfm2_moe_expert_bias_dense2", [](Json& c) { c["num_dense_layers"] = 1; }),
            "");
  EXPECT_NE(
      load_error("lfm2_moe_expert_bias_dense2", [](Json& c) { c["use_expert_bias"] = false; }), "");
  EXPECT_NE(
      load_error("lfm2_moe_nobias_nonorm_untied", [](Json& c) { c["use_expert_bias"] = true; }),
      "");
}

TEST(ConfigErrors, CrossAttention) {
  for (const char* fixture : {"gpt2_tied", "gpt_bigcode_mqa_tied"})
    expect_error(
        fixture, [](Json& c) { c["add_cross_attention"] = true; },
        "field \"add_cross_attention\" is true");
}

TEST(ConfigErrors, FalconLayouts) {
  expect_error(
      "falcon_new_arch_gqa", [](Json& c) { c["parallel_attn"] = false; },
      "field \"parallel_attn\" is false with new_decoder_architecture");
  expect_error(
      "falcon_new_arch_gqa", [](Json& c) { c["num_ln_in_parallel_attn"] = 3; },
      "field \"num_ln_in_parallel_attn\" is 3");
  expect_error(
      "falcon_parallel_mqa_tied", [](Json& c) { c["num_ln_in_parallel_attn"] = 2; },
      "field \"num_ln_in_parallel_attn\" is 2 without new_decoder_architecture");
  expect_error(
      "falcon_alibi_sequential_bias", [](Json& c) { c["num_kv_heads"] = 4; },
      "field \"num_kv_heads\" is 4");
}

TEST(ConfigErrors, AttentionVariants) {
  expect_error(
      "gemma_tied", [](Json& c) { c["use_bidirectional_attention"] = true; },
      "field \"use_bidirectional_attention\" is true");
  expect_error(
      "gemma2_softcap_window", [](Json& c) { c["sliding_window"] = nullptr; },
      "is sliding_attention but field \"sliding_window\" is null");
  expect_error(
      "smollm3_tied_norope",
      [](Json& c) {
        c["layer_types"] = {"sliding_attention", "full_attention", "full_attention",
                            "full_attention"};
      },
      "layer_types[0] is \"sliding_attention\" but use_sliding_window");
  expect_error(
      "gemma3_text_untied_softcap",
      [](Json& c) {
        c["rope_parameters"] = {{"rope_type", "default"}};
      },
      "field \"rope_parameters\" must be keyed by layer type");
}

TEST(ConfigErrors, Phi3RefusesRenamedRopeTypes) {
  // Phi3Config reads "su" and "yarn" as longrope; lathe refuses rather than misread them.
  expect_error(
      "phi3_untied_window",
      [](Json& c) {
        c["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}};
      },
      "field \"rope_scaling.type\" is \"yarn\"");
}

// Sizes from config.json are checked before anything is sized from them: two billion layers
// used to allocate a 16 GB per-layer table before the weights could disagree.
TEST(ConfigErrors, MoreLayersThanTensorsIsRefusedBeforeAllocating) {
  for (const char* fixture : {"llama_tied_gqa", "qwen2_sliding", "gemma2_softcap_window"})
    expect_error(
        fixture, [](Json& c) { c["num_hidden_layers"] = 2000000000; },
        "field \"num_hidden_layers\" is 2000000000, but the checkpoint holds");
}

// Missing sizes take the architecture's full-size defaults (vocab 128256, hidden 2048, ...);
// the zero stand-ins for the misshapen tensors used to allocate gigabytes before the error.
TEST(ConfigErrors, StandInsForMisshapenTensorsCannotOutgrowTheCheckpoint) {
  expect_error(
      "smollm3_tied_norope",
      [](Json& c) {
        c.erase("vocab_size");
        c.erase("hidden_size");
        c.erase("intermediate_size");
      },
      "config.json does not describe them");
}

// A negative max_window_layers indexed the per-layer window table at -1 (heap overflow under
// ASan). Qwen2Config makes every layer i >= max_window_layers slide, so all of them do.
TEST(ConfigErrors, NegativeMaxWindowLayersSlidesEveryLayer) {
  EXPECT_EQ(load_error("qwen2_sliding", [](Json& c) { c["max_window_layers"] = -1; }), "");
}

TEST(ConfigErrors, NeoxFamilyAndLaterArchitectures) {
  expect_error(
      "gptj_untied_rotary8", [](Json& c) { c["rotary_dim"] = 17; }, "field \"rotary_dim\" is 17");
  expect_error(
      "olmo_untied_clip_gqa", [](Json& c) { c["clip_qkv"] = 0.0; }, "field \"clip_qkv\" is 0");
  expect_error(
      "exaone4_untied_sliding_pattern", [](Json& c) { c["sliding_window_pattern"] = "LLLG"; },
      "field \"sliding_window_pattern\" is \"LLLG\"");
  expect_error(
      "apertus_tied_bias_default_rope", [](Json& c) { c["hidden_act"] = "quick_gelu"; },
      "field \"hidden_act\" is \"quick_gelu\"");
  expect_error(
      "phi_untied_qk_layernorm", [](Json& c) { c["hidden_act"] = "quick_gelu"; },
      "field \"hidden_act\" is \"quick_gelu\"");
}

// Olmo3 builds a sliding mask whatever its layers are and needs a window for it; its rotary
// entries are keyed by layer type; apply_rotary_pos_emb rotates the whole head.
TEST(ConfigErrors, Olmo3) {
  expect_error(
      "olmo3_untied_sliding_linear", [](Json& c) { c["sliding_window"] = nullptr; },
      "field \"sliding_window\" is null");
  expect_error(
      "olmo3_untied_sliding_linear",
      [](Json& c) {
        c["rope_parameters"] = {{"rope_type", "default"}};
      },
      "field \"rope_parameters\" must be keyed by layer type");
  expect_error(
      "olmo3_tied_layer_types_yarn_bias",
      [](Json& c) { c["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0.5; },
      "field \"partial_rotary_factor\" gives 6 rotary dims of head_dim 12");
}

TEST(ConfigErrors, Cohere2) {
  expect_error(
      "cohere2_tied_sliding_pattern", [](Json& c) { c["sliding_window"] = nullptr; },
      "field \"sliding_window\" is null");
  expect_error(
      "cohere2_untied_layer_types_bias_headdim",
      [](Json& c) {
        c["layer_types"] = {"sliding_attention", "full_attention"};
      },
      "field \"layer_types\" must list 3 layer types");
}

// Ministral3Attention scales its queries by two rope_parameters fields; transformers fails
// without either.
TEST(ConfigErrors, Ministral3) {
  expect_error(
      "ministral3_untied_yarn_llama4_scale",
      [](Json& c) { c["rope_parameters"].erase("llama_4_scaling_beta"); },
      "field \"llama_4_scaling_beta\" is missing");
  expect_error(
      "ministral3_tied_window_default_rope",
      [](Json& c) {
        c["rope_parameters"] = {
            {"rope_type", "default"}, {"rope_theta", 10000.0}, {"llama_4_scaling_beta", 0.1}};
      },
      "field \"original_max_position_embeddings\" is missing");
  EXPECT_EQ(load_error("ministral3_untied_yarn_llama4_scale",
                       [](Json& c) { c["rope_parameters"]["llama_4_scaling_beta"] = 0.0; }),
            "");
  expect_error(
      "ministral3_tied_window_default_rope", [](Json& c) { c["sliding_window"] = 0; },
      "field \"sliding_window\" is 0");
}

// Mamba2Config.validate_architecture, heads shared by groups, the dt clamp's bounds.
TEST(ConfigErrors, Mamba2) {
  expect_error(
      "mamba2_groups", [](Json& c) { c["expand"] = 3; },
      "hidden_size * expand (108) must equal num_heads * head_dim (72)");
  expect_error(
      "mamba2_groups", [](Json& c) { c["n_groups"] = 4; },
      "num_heads 6 is not a multiple of n_groups 4");
  expect_error(
      "mamba2_tied",
      [](Json& c) {
        c["time_step_limit"] = {0.5, 0.1};
      },
      "field \"time_step_limit\" is [0.5,0.1]");
  expect_error(
      "mamba2_tied", [](Json& c) { c["time_step_limit"] = {0.1}; },
      "field \"time_step_limit\" must be [min, max]");
  expect_error(
      "mamba2_tied", [](Json& c) { c["hidden_act"] = "quick_gelu"; },
      "field \"hidden_act\" is \"quick_gelu\"");
  expect_error(
      "mamba2_groups", [](Json& c) { c["conv_kernel"] = 0; }, "conv_kernel");
  // A finite limit (or a null upper bound: none) loads.
  EXPECT_EQ(load_error("mamba2_tied", [](Json& c) { c["time_step_limit"] = {0.0, 10.0}; }), "");
  EXPECT_EQ(load_error("mamba2_tied", [](Json& c) { c["time_step_limit"] = {0.0, nullptr}; }), "");
}

// GraniteMoeHybridConfig: layer types by their legacy and current names, the Mamba2 head
// arithmetic of validate_architecture, and the two position embedding types it builds.
TEST(ConfigErrors, GraniteMoeHybrid) {
  expect_error(
      "granitemoehybrid_moe_rope",
      [](Json& c) {
        c["layer_types"] = {"mamba", "attention", "moe", "mamba"};
      },
      "layer_types[2] is \"moe\"");
  expect_error(
      "granitemoehybrid_moe_rope",
      [](Json& c) {
        c["layer_types"] = {"mamba", "attention"};
      },
      "field \"layer_types\" must list 4 layer types");
  expect_error(
      "granitemoehybrid_moe_rope", [](Json& c) { c["mamba_n_heads"] = 3; },
      "mamba_n_heads 3 must divide mamba_expand * hidden_size (64)");
  expect_error(
      "granitemoehybrid_dense_nope_tied", [](Json& c) { c["mamba_d_head"] = 8; },
      "mamba_d_head * mamba_n_heads (24) must equal mamba_expand * hidden_size (48)");
  expect_error(
      "granitemoehybrid_moe_rope", [](Json& c) { c["mamba_n_groups"] = 3; },
      "mamba_n_heads 4 is not a multiple of mamba_n_groups 3");
  expect_error(
      "granitemoehybrid_moe_rope", [](Json& c) { c["position_embedding_type"] = "alibi"; },
      "field \"position_embedding_type\" is \"alibi\"");
  expect_error(
      "granitemoehybrid_moe_rope", [](Json& c) { c["num_experts_per_tok"] = 7; },
      "num_experts_per_tok");
  expect_error(
      "granitemoehybrid_dense_nope_tied",
      [](Json& c) {
        c["time_step_limit"] = {0.5, 0.1};
      },
      "field \"time_step_limit\" is [0.5,0.1]");
  // "nope" (Granite 4.0-H's published value) means no rotary, as null does.
  EXPECT_EQ(load_error("granitemoehybrid_moe_rope",
                       [](Json& c) { c["position_embedding_type"] = "nope"; }),
            "");
  // Layer types under the attribute name, and the current names, load.
  EXPECT_EQ(load_error("granitemoehybrid_moe_rope",
                       [](Json& c) {
                         c.erase("layer_types");
                         c["layers_block_type"] = {"linear_attention", "full_attention",
                                                   "linear_attention", "linear_attention"};
                       }),
            "");
}

// NemotronHConfig: layer kinds by pattern or list, and what lathe does not build yet.
TEST(ConfigErrors, NemotronH) {
  expect_error(
      "nemotron_h_pattern_moe_groups", [](Json& c) { c["hybrid_override_pattern"] = "ME*M-X"; },
      "field \"hybrid_override_pattern\" holds 'X'");
  expect_error(
      "nemotron_h_dense_biases",
      [](Json& c) {
        c["layers_block_type"] = {"linear_attention", "sliding_attention", "mlp"};
      },
      "layers_block_type[1] is \"sliding_attention\"");
  expect_error(
      "nemotron_h_pattern_moe_groups", [](Json& c) { c["moe_latent_size"] = 16; },
      "field \"moe_latent_size\" is 16");
  expect_error(
      "nemotron_h_pattern_moe_groups", [](Json& c) { c["sliding_window"] = 8; },
      "field \"sliding_window\" is 8");
  expect_error(
      "nemotron_h_pattern_moe_groups", [](Json& c) { c["n_groups"] = 3; },
      "mamba_num_heads 4 is not a multiple of n_groups 3");
  expect_error(
      "nemotron_h_pattern_moe_groups", [](Json& c) { c["num_experts_per_tok"] = 9; },
      "num_experts_per_tok");
  // A pattern longer than the checkpoint's layers names the first tensor it lacks.
  expect_error(
      "nemotron_h_pattern_moe_groups", [](Json& c) { c["hybrid_override_pattern"] = "ME*M-EE"; },
      "backbone.layers.6.norm.weight");
}

// FalconH1Config: the mixer's width and heads, and the multiplier lists' lengths.
TEST(ConfigErrors, FalconH1) {
  expect_error(
      "falcon_h1_mup_norm_before_gate", [](Json& c) { c["mamba_d_head"] = 10; },
      "mamba_d_head * mamba_n_heads (40) must equal the mixer's width mamba_d_ssm (48)");
  expect_error(
      "falcon_h1_mup_norm_before_gate",
      [](Json& c) {
        c["ssm_multipliers"] = {1.0, 2.0};
      },
      "field \"ssm_multipliers\" must list 5 numbers");
  expect_error(
      "falcon_h1_mup_norm_before_gate",
      [](Json& c) {
        c["mlp_multipliers"] = {1.0, "x"};
      },
      "field \"mlp_multipliers\" holds \"x\"");
  expect_error(
      "falcon_h1_gate_then_norm_groups", [](Json& c) { c["mamba_n_groups"] = 2; },
      "mamba_n_heads 3 is not a multiple of mamba_n_groups 2");
  expect_error(
      "falcon_h1_gate_only_tied_biases", [](Json& c) { c["mamba_d_ssm"] = 40; },
      "must equal the mixer's width mamba_d_ssm (40)");
}

// PhimoeConfig: sparsemixer picks two experts; longrope needs both mscales.
TEST(ConfigErrors, Phimoe) {
  expect_error(
      "phimoe_biases_jitter", [](Json& c) { c["num_experts_per_tok"] = 3; },
      "field \"num_experts_per_tok\" is 3; PhiMoE's sparsemixer picks 2 experts");
  expect_error(
      "phimoe_longrope_mscale_window", [](Json& c) { c["rope_parameters"].erase("long_mscale"); },
      "field \"rope_parameters.long_mscale\" must be a number (longrope)");
  expect_error(
      "phimoe_biases_jitter",
      [](Json& c) {
        c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e4}};
      },
      "implements the default and longrope rotary");
}

// A multimodal wrapper whose text model lathe does not implement, or a malformed text_config.
TEST(ConfigErrors, MultimodalText) {
  expect_error(
      "llava_multimodal_text", [](Json& c) { c["text_config"]["model_type"] = "mamba"; },
      "text_config: field \"model_type\" is \"mamba\"");
  expect_error(
      "llava_multimodal_text", [](Json& c) { c["text_config"] = 3; },
      "field \"text_config\" must be an object");
  // The text model's own checks name text_config.
  expect_error(
      "gemma3_multimodal_text", [](Json& c) { c["text_config"]["num_key_value_heads"] = 0; },
      "config.json: text_config: field \"num_key_value_heads\" is 0");
}

// Gemma4TextConfig fields lathe does not implement are errors naming them; KV sharing needs a
// producing layer of each shared type.
TEST(ConfigErrors, Gemma4) {
  expect_error(
      "gemma4_text_keqv_tied", [](Json& c) { c["enable_moe_block"] = true; },
      "field \"num_experts\" is missing (enable_moe_block is true)");
  expect_error(
      "gemma4_text_moe", [](Json& c) { c["top_k_experts"] = 6; },
      "field \"top_k_experts\" is 6, more than the 5 experts");
  expect_error(
      "gemma4_text_keqv_tied", [](Json& c) { c["use_bidirectional_attention"] = "all"; },
      "field \"use_bidirectional_attention\" is \"all\"");
  EXPECT_EQ(load_error("gemma4_text_keqv_tied",
                       [](Json& c) { c["use_bidirectional_attention"] = "vision"; }),
            "");
  expect_error(
      "gemma4_text_keqv_tied", [](Json& c) { c["attention_bias"] = true; },
      "field \"attention_bias\" is true");
  expect_error(
      "gemma4_text_keqv_tied", [](Json& c) { c["num_kv_shared_layers"] = 4; },
      "field \"num_kv_shared_layers\" is 4, must be in [0, 4)");
  // Layers 2 and 3 share; no sliding layer stays before them to store what layer 2 reads.
  expect_error(
      "gemma4_text_keqv_tied",
      [](Json& c) {
        c["layer_types"] = {"full_attention", "full_attention", "sliding_attention",
                            "full_attention"};
        c["num_kv_shared_layers"] = 2;
      },
      "layer 2 shares the keys and values of an earlier sliding_attention layer, and there is "
      "none");
  expect_error(
      "gemma4_text_ple_untied_softcap",
      [](Json& c) { c["per_layer_config"]["1"]["intermediate_size"] = 96; },
      "field \"intermediate_size\" is overridden per layer");
  expect_error(
      "gemma4_text_ple_untied_softcap",
      [](Json& c) { c["per_layer_config"]["1"]["head_dim"] = 24; },
      "the full_attention layers differ in head_dim");
  expect_error(
      "gemma4_text_keqv_tied",
      [](Json& c) {
        c["rope_parameters"] = {
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
      },
      "field \"rope_parameters\" has no object for full_attention layers");
  expect_error(
      "gemma4_text_keqv_tied",
      [](Json& c) {
        c["rope_parameters"] = {
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}},
            {"full_attention",
             {{"rope_type", "linear"},
              {"factor", 2.0},
              {"partial_rotary_factor", 0.5},
              {"rope_theta", 1e4}}}};
      },
      "rotates the whole head");
}

// Llama4TextConfig's layer lists and chunking: malformed or inconsistent values name the field.
TEST(ConfigErrors, Llama4) {
  const std::string f = "llama4_chunked_nope_moe_llama3";
  expect_error(
      f, [](Json& c) { c["layer_types"] = Json::array({"chunked_attention"}); },
      "field \"layer_types\" must list 5 layer types");
  expect_error(
      f,
      [](Json& c) {
        c["layer_types"] = {"chunked_attention", "sliding_attention", "full_attention",
                            "chunked_attention", "full_attention"};
      },
      "layer_types[1] is \"sliding_attention\"");
  expect_error(
      f,
      [](Json& c) {
        c["attention_chunk_size"] = nullptr;
        c["layer_types"] = {"chunked_attention", "full_attention", "full_attention",
                            "full_attention", "full_attention"};
      },
      "layer 0 is chunked_attention but field \"attention_chunk_size\" is null");
  expect_error(
      f,
      [](Json& c) {
        c["no_rope_layers"] = {1, 0};
      },
      "field \"no_rope_layers\" lists 2 layers of 5");
  expect_error(
      f,
      [](Json& c) {
        c["moe_layers"] = {1, 5};
      },
      "field \"moe_layers\" holds 5");
  expect_error(
      f, [](Json& c) { c["floor_scale"] = 0; }, "field \"floor_scale\" is 0");
  expect_error(
      f, [](Json& c) { c["interleave_moe_layer_step"] = 0; },
      "field \"interleave_moe_layer_step\" is 0");
  expect_error(
      f, [](Json& c) { c["num_experts_per_tok"] = 6; },
      "field \"num_experts_per_tok\" is 6, more than the 5 experts");
}

TEST(ConfigErrors, Gemma3n) {
  const char* fixture = "gemma3n_text_kv_shared_sparse";  // 6 layers
  expect_error(
      fixture, [](Json& c) { c["altup_active_idx"] = 4; },
      "field \"altup_active_idx\" is 4, must be below 4 (altup_num_inputs)");
  expect_error(
      fixture,
      [](Json& c) {
        c["activation_sparsity_pattern"] = {0.5, 0.0};
      },
      "field \"activation_sparsity_pattern\" must list one value for each of 6 layers");
  expect_error(
      fixture, [](Json& c) { c["activation_sparsity_pattern"][2] = 1.0; },
      "activation_sparsity_pattern[2] is 1.0, must be in [0, 1)");
  expect_error(
      fixture,
      [](Json& c) {
        c["intermediate_size"] = {60, 44};
      },
      "field \"intermediate_size\" lists 2 sizes for 6 layers");
  expect_error(
      fixture, [](Json& c) { c["attention_bias"] = true; }, "field \"attention_bias\" is true");
  expect_error(
      fixture, [](Json& c) { c["num_kv_shared_layers"] = 5; },
      "layer 2 shares the keys and values of an earlier full_attention layer");
  // The multimodal wrapper's vision and audio ids must follow the text ids to the vocabulary's
  // end, as Gemma3nModel's id ranges assume.
  expect_error(
      "gemma3n_multimodal_text", [](Json& c) { c["audio_config"]["vocab_offset"] = 121; },
      "vision ids [112, 120) and audio ids [121, 129) must follow each other");
}

}  // namespace
}  // namespace lathe
