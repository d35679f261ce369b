// Rotary position embeddings and their scaling kinds, as transformers' modeling_rope_utils
// computes them (inverse frequencies in f32, cos/sin times an attention factor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "io/json.h"

namespace lathe {

enum class RopeKind { Default, Linear, Dynamic, Yarn, Llama3, LongRope, Proportional };

struct RopeConfig {
  RopeKind kind = RopeKind::Default;
  double theta = 10000.0;
  int64_t head_dim = 0;
  int64_t rot_dim = 0;  // head_dim * partial_rotary_factor
  int64_t max_position_embeddings = 0;
  int64_t original_max_position_embeddings = 0;
  double factor = 1.0;
  // yarn
  std::optional<double> attention_factor;
  double beta_fast = 32, beta_slow = 1;
  std::optional<double> mscale, mscale_all_dim;
  bool truncate = true;
  // llama3
  double low_freq_factor = 1, high_freq_factor = 4;
  // longrope
  std::vector<double> long_factor, short_factor;
  // PhimoeRotaryEmbedding: its frequencies always from short_factor (it calls the longrope
  // init without a length), its cos and sin times long_mscale past original_max_position_
  // embeddings, else short_mscale (the attention factor unused).
  bool phimoe_mscale = false;
  double short_mscale = 1, long_mscale = 1;
  // proportional (Gemma4): the first rotated_pairs of the head_dim / 2 frequencies are
  // theta^(-2i / head_dim), the rest 0 (those dims pass through); rot_dim is head_dim.
  int64_t rotated_pairs = 0;
  // Ministral3's llama_4_scaling_beta (get_llama_4_attn_scale): cos and sin also times
  // 1 + beta * log(1 + floor(pos / llama_4_scaling_length)), which scales the queries rotated by
  // them (0: no such scale).
  double llama_4_scaling_beta = 0;
  int64_t llama_4_scaling_length = 0;
  // Llama4TextAttention's attn_temperature_tuning (its NoPE layers): cos and sin also times
  // log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1 (attn_scale 0: no such scale). A
  // schedule that rotates nothing (Proportional with no rotated pairs) then only scales.
  double temperature_attn_scale = 0;
  int64_t temperature_floor_scale = 0;
};

// Reads rope_parameters (transformers >= 5) or the legacy rope_theta + rope_scaling fields of
// config.json. An unknown rope type or a missing required field is an error naming it.
// `default_partial`: partial_rotary_factor when config.json has none (Phi 0.5, StableLm 0.25).
RopeConfig read_rope_config(const JsonFields& cfg, int64_t head_dim,
                            int64_t max_position_embeddings, double default_theta = 10000.0,
                            double default_partial = 1.0);

// For models whose apply_rotary_pos_emb rotates the whole head (no dims passed through): the
// default kind ignores partial_rotary_factor there (compute_default_rope_parameters uses
// head_dim), so the rotary dims become head_dim; a scaled kind whose partial_rotary_factor
// leaves dims unrotated is an error naming the field (transformers cannot apply its tables).
void rotate_whole_head(RopeConfig& r, const std::string& origin, const std::string& architecture);

class Rope : public graph::RopeSchedule {
 public:
  explicit Rope(RopeConfig config);
  const RopeConfig& config() const { return config_; }

  // graph::RopeSchedule: what a RopeTables node computes. Schedules that do not depend on the
  // sequence length keep their inverse frequencies from construction, so filling allocates
  // nothing; dynamic and longrope recompute them for the length pos0 + n.
  int64_t rot_dim() const override { return config_.rot_dim; }
  void fill(int64_t pos0, int64_t n, float* cos, float* sin, int64_t stride) const override;
  uint64_t hash() const override;

  // cos and sin [n, rot_dim / 2] for positions pos0 .. pos0 + n - 1. Dynamic and longrope
  // scaling depend on the sequence length so far, pos0 + n, as in transformers.
  void tables(int64_t pos0, int64_t n, Tensor* cos, Tensor* sin) const;

  // Inverse frequencies (rot_dim / 2) and attention factor for a sequence of seq_len.
  std::vector<float> inv_freq(int64_t seq_len, float* attention_factor) const;

 private:
  RopeConfig config_;
  bool length_dependent_ = false;
  std::vector<float> fixed_freq_;  // when not length dependent
  float fixed_factor_ = 1.0f;
};

}  // namespace lathe
