// Mixture-of-experts feed-forward blocks, as transformers' sparse MoE modules compute them: a
// router (a linear layer) picks k experts per token (graph Op::Route), each expert is a gated
// MLP run on its own tokens only (Op::Experts), and some families add a shared expert that
// every token runs. Expert weights are loaded as the checkpoints publish them: one tensor per
// expert and projection (Mixtral's w1/w2/w3, Qwen2Moe's gate_proj/up_proj/down_proj), or 3-D
// tensors with every expert (GraniteMoe's input_linear/output_linear), viewed per expert with
// no copy, so that weights stay mapped (Weights::KeepMapped, where the rest is copied at load)
// and a step reads only the experts it routes to.
#pragma once

#include <string>
#include <vector>

#include "models/blocks.h"
#include "models/layers.h"

namespace lathe {

struct MoeSpec {
  int64_t experts = 0, top_k = 0, inter = 0;  // inter: each expert's intermediate size
  graph::Routing routing = graph::Routing::SoftmaxTopK;
  bool norm_topk = false;  // norm_topk_prob: the k weights divided by their sum
  float norm_eps = 0;
  float scale = 1;                     // routed_scaling_factor
  int64_t groups = 1, top_groups = 1;  // n_group, topk_group (Sigmoid routing)
  bool correction_bias = false;        // e_score_correction_bias moves the choice (sigmoid routers)
  graph::Activation act = graph::Activation::Silu;
  // false: experts (and the shared expert) are down(act(up(x))), with no gate (NemotronH).
  bool gated = true;
  graph::ExpertGluParams glu = {};  // GptOss: the clamped SwiGLU (swiglu_limit, swiglu_alpha)
  int64_t shared_inter = 0;         // a shared expert's intermediate size (0: none)
  bool shared_gate = false;         // Qwen2Moe: sigmoid(shared_expert_gate(x)) * shared_expert(x)
  bool scale_inputs = false;        // Llama4: the route's weights scale the experts' inputs
};

// Where a checkpoint keeps a MoE block's tensors, relative to the block's prefix.
struct MoeNames {
  std::string router = "gate.weight";
  // Per-expert tensors: experts + "<e>." + gate / up / down + ".weight".
  std::string experts = "experts.";
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
  // Fused 3-D tensors instead (when gate_up is set): gate_up [experts, 2 inter, hidden] (gate
  // rows first), and down_fused [experts, hidden, inter].
  std::string gate_up = {}, down_fused = {};
  std::string shared = "shared_expert.", shared_gate = "shared_expert_gate.weight";
  std::string correction_bias = "gate.e_score_correction_bias";
  bool correction_bias_row = false;  // stored [1, experts] (Ernie4_5_Moe's moe_statics)
};

struct MoeWeights {
  Tensor router;
  Tensor router_bias;                    // GptOssTopKRouter's (undefined: none)
  std::vector<GatedMlpWeights> experts;  // gate, up, down of each (biases: GptOss only)
  GatedMlpWeights shared;                // when the spec has a shared expert
  Tensor shared_gate;                    // [1, hidden]
  Tensor correction_bias;                // [experts]
};

MoeWeights load_moe(Weights& w, const std::string& prefix, int64_t hidden, const MoeSpec& s,
                    const MoeNames& names = {});

// The config fields a MoeSpec came from, by their names in this architecture's config.json.
struct MoeFields {
  const char* experts = "num_experts";
  const char* top_k = "num_experts_per_tok";
  const char* inter = "moe_intermediate_size";
};
// Throws an error naming config.json's field when the spec cannot describe the checkpoint:
// counts out of range, top-k above the experts (or the groups' experts), more experts than
// the checkpoint has tensors (so that loading never walks a count config.json made up).
void check_moe_spec(const Checkpoint& ckpt, const JsonFields& f, const MoeSpec& s,
                    const MoeFields& names = {});

// Reads the layers that run experts as Qwen2MoeConfig and Qwen3MoeConfig say: layer i does
// unless it is in mlp_only_layers, when num_experts > 0 and (i + 1) % decoder_sparse_step == 0.
std::vector<bool> read_sparse_layers(const JsonFields& f, int64_t num_layers, int64_t experts);

// DeepseekV3Config and Glm4MoeConfig: n_routed_experts experts, num_experts_per_tok of them
// chosen by sigmoid scores plus e_score_correction_bias within the topk_group best of n_group
// groups, weights renormalised (norm_topk_prob) and scaled by routed_scaling_factor, plus
// n_shared_experts shared experts as one MLP of n_shared_experts * moe_intermediate_size; the
// first first_k_dense_replace layers are dense. `d` holds the config class's defaults.
struct SigmoidMoeDefaults {
  int64_t experts, top_k, inter, shared_experts, groups, top_groups, first_dense;
  double scale;
  bool norm_topk;
};
MoeSpec read_sigmoid_moe(const JsonFields& f, const SigmoidMoeDefaults& d);
std::vector<bool> read_first_dense_layers(const JsonFields& f, int64_t num_layers,
                                          int64_t default_first_dense);
// GlmMoeDsaConfig and DeepseekV32Config: mlp_layer_types ("dense" or "sparse" per layer) when
// config.json lists them, else the first first_k_dense_replace layers dense.
std::vector<bool> read_mlp_layer_types(const JsonFields& f, int64_t num_layers,
                                       int64_t default_first_dense);

namespace blocks {

// The MoE block of x [n, hidden]: router logits (+ router bias), route ("<prefix>route", [2, n, k]:
// weights, then expert ids), experts, plus the (gated) shared expert; named "<prefix>mlp_out".
Value moe(Builder& g, Value x, const MoeWeights& w, const MoeSpec& s, const std::string& prefix);

}  // namespace blocks
}  // namespace lathe
