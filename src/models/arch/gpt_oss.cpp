// GptOssForCausalLM: transformers/models/gpt_oss (configuration_gpt_oss.py,
// modeling_gpt_oss.py). Pre-norm RMSNorm blocks (as Llama) whose attention has q/k/v/o biases
// (attention_bias), a learned sink logit per head in the softmax, and sliding-window and full
// layers by layer_types; yarn rotary by default; every layer's MLP is a mixture of experts whose
// router has a bias and takes the top-k logits then a softmax over those k, and whose experts
// have biases and a clamped SwiGLU on interleaved gate/up columns. Published checkpoints keep
// the experts' matrices in MXFP4 (quantization_config quant_method "mxfp4"), repacked here at
// load into DType::MXFP4 and run by its kernels (core/mxfp4.h), or, with
// ModelOptions::dequantize_mxfp4, dequantized as transformers does on a CPU (models/mxfp4.h).
#include <cstring>

#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/mxfp4.h"
#include "models/registry.h"

namespace lathe {
namespace {

// GptOssConfig's fields beyond the Llama family's.
struct GptOssConfig {
  LlamaFamilyConfig base;  // attention (biases), layer_windows, rope, sizes
  MoeSpec moe;
  bool mxfp4 = false;  // quantization_config quant_method "mxfp4": experts as blocks + scales
};

// Of each [rows, cols] matrix m[e] of m [experts, rows, cols], the columns first, first + step,
// ... as the rows of out [experts, cols / step, rows]: with step 1 a transpose, with step 2 the
// even or odd columns transposed. Any 2- or 4-byte dtype (the matrix dtype, or F32 biases).
Tensor columns_as_rows(const Tensor& m, int64_t first, int64_t step) {
  const int64_t experts = m.dim(0), rows = m.dim(1), cols = m.dim(2), out_rows = cols / step;
  Tensor out = Tensor::zeros(m.dtype(), {experts, out_rows, rows});
  auto copy = [&](auto zero) {
    using T = decltype(zero);
    const T* in = m.data<T>();
    T* o = out.mut<T>();
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = in + (e * rows + r) * cols + first;
        for (int64_t c = 0; c < out_rows; ++c) o[(e * out_rows + c) * rows + r] = src[c * step];
      }
  };
  if (dtype_size(m.dtype()) == 4)
    copy(int32_t{});
  else
    copy(uint16_t{});
  return out;
}

// Rows first, first + 2, ... of each [rows, cols] matrix of m [experts, rows, cols], of any
// dtype (MXFP4's rows are whole blocks: copying rows copies their blocks).
Tensor alternate_rows(const Tensor& m, int64_t first) {
  const int64_t experts = m.dim(0), rows = m.dim(1), half = rows / 2;
  const size_t row = row_bytes(m.dtype(), m.dim(2));
  Tensor out = Tensor::zeros(m.dtype(), {experts, half, m.dim(2)});
  const auto* in = m.data<uint8_t>();
  auto* o = static_cast<uint8_t*>(out.mut<void>());
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < half; ++r)
      std::memcpy(o + static_cast<size_t>(e * half + r) * row,
                  in + static_cast<size_t>(e * rows + 2 * r + first) * row, row);
  return out;
}

// Expert e's [rows, cols] matrix (or [rows] vector when cols is 0) of a stacked tensor, a view.
Tensor expert_slice(const Tensor& stacked, int64_t e, int64_t rows, int64_t cols) {
  const Tensor t = stacked.rows(e, 1);
  return cols > 0 ? t.reshape({rows, cols}) : t.reshape({rows});
}

// GptOssExperts' tensors [experts, hidden, 2 * inter] (gate_up_proj: gate in the even columns,
// up in the odd ones, as _apply_gate slices gate_up[..., ::2] and [..., 1::2]), down_proj
// [experts, inter, hidden], both multiplied as x @ W, and their biases; copied once into the
// [out, in] rows the Linear kernels take. MXFP4 checkpoints store the matrices as blocks and
// scales of those rows already ([experts, 2 * inter, hidden] and [experts, hidden, inter]:
// transformers dequantizes, then transposes them into the parameters): `native` keeps them
// as DType::MXFP4, gate and up taken apart by copying alternate rows of blocks.
std::vector<GatedMlpWeights> load_experts(Weights& w, const std::string& p, int64_t hidden,
                                          const MoeSpec& s, bool mxfp4, bool native) {
  const int64_t n = s.experts, inter = s.inter;
  Tensor gate, up, down_rows;
  // Experts listed in modules_to_not_convert keep plain tensors in an MXFP4 checkpoint.
  if (mxfp4 && !(w.has(p + "gate_up_proj") && w.has(p + "down_proj"))) {
    const Tensor gate_up_rows = w.mxfp4(p + "gate_up_proj", {n, 2 * inter, hidden}, native);
    gate = alternate_rows(gate_up_rows, 0);
    up = alternate_rows(gate_up_rows, 1);
    down_rows = w.mxfp4(p + "down_proj", {n, hidden, inter}, native);
  } else {
    const Tensor gate_up = w.matrix(p + "gate_up_proj", {n, hidden, 2 * inter});
    gate = columns_as_rows(gate_up, 0, 2);
    up = columns_as_rows(gate_up, 1, 2);
    down_rows = columns_as_rows(w.matrix(p + "down_proj", {n, inter, hidden}), 0, 1);
  }
  const Tensor gate_up_bias =
      w.vector(p + "gate_up_proj_bias", {n, 2 * inter}).reshape({n, 1, 2 * inter});
  const Tensor down_bias = w.vector(p + "down_proj_bias", {n, hidden});
  const Tensor gate_b = columns_as_rows(gate_up_bias, 0, 2);
  const Tensor up_b = columns_as_rows(gate_up_bias, 1, 2);
  std::vector<GatedMlpWeights> experts;
  for (int64_t e = 0; e < n; ++e)
    experts.push_back({.gate = expert_slice(gate, e, inter, hidden),
                       .up = expert_slice(up, e, inter, hidden),
                       .down = expert_slice(down_rows, e, hidden, inter),
                       .gate_bias = expert_slice(gate_b, e, inter, 0),
                       .up_bias = expert_slice(up_b, e, inter, 0),
                       .down_bias = expert_slice(down_bias, e, hidden, 0)});
  return experts;
}

// transformers GptOssModel / GptOssDecoderLayer: x + attn(norm(x)), then x + mlp(norm(x)).
class GptOssModel : public LayerStack {
 public:
  GptOssModel(const Checkpoint& ckpt, const GptOssConfig& cfg, const ModelOptions& opts) {
    const LlamaFamilyConfig& c = cfg.base;
    ropes_.emplace_back(c.rope);
    const int64_t h = c.hidden_size;
    const Norm rms = final_norm_ = rms_norm_of(c);
    load(ckpt, opts, c, [&](Weights& w, int64_t i, const std::string& p) {
      DecoderLayer l{.spec = layer_attention(c, i), .moe_spec = cfg.moe};
      l.load_norms(w, p, rms, h,
                   {.attn_norm = "input_layernorm.", .mlp_norm = "post_attention_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.sinks = w.vector(p + "self_attn.sinks", {l.spec.heads});
      MoeWeights& moe = l.moe.emplace();
      moe.router = w.matrix(p + "mlp.router.weight", {cfg.moe.experts, h});
      moe.router_bias = w.vector(p + "mlp.router.bias", {cfg.moe.experts});
      moe.experts =
          load_experts(w, p + "mlp.experts.", h, cfg.moe, cfg.mxfp4, !opts.dequantize_mxfp4);
      layers_.push_back(std::move(l));
    });
  }
};

// GptOssConfig.__post_init__'s rope_parameters when config.json has none: yarn, factor 32 over
// 4096 positions, beta_fast 32, beta_slow 1, truncate false.
Json with_default_rope(const JsonFields& f) {
  Json c = f.json();
  if (f.has("rope_parameters") || f.has("rope_scaling")) return c;
  c["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 32.0},
                          {"beta_fast", 32.0},   {"beta_slow", 1.0},
                          {"truncate", false},   {"original_max_position_embeddings", 4096}};
  return c;
}

}  // namespace

std::unique_ptr<Model> load_gpt_oss(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Mxfp4Config: the experts' matrices as MXFP4 blocks and scales (transformers converts only
  // GptOssExperts; attention, router, embeddings and lm_head stay as they are).
  bool mxfp4 = false;
  if (f.has("quantization_config")) {
    const Json& q = f.at("quantization_config");
    const Json method = q.is_object() ? q.value("quant_method", Json()) : Json();
    if (method != "mxfp4")
      fail(f.origin(), ": field \"quantization_config\" has quant_method ", method.dump(),
           "; lathe reads GptOss checkpoints unquantized or in \"mxfp4\"");
    mxfp4 = true;
  }
  // GptOssConfig defaults; head_dim is 64 whatever hidden_size / heads is. hidden_act is not
  // read by GptOss's modules (its experts' clamped SwiGLU is fixed), so it is not checked.
  GptOssConfig c{.base = read_llama_family_config(ckpt, {.vocab_size = 201088,
                                                         .hidden_size = 2880,
                                                         .intermediate_size = 2880,
                                                         .num_layers = 36,
                                                         .heads = 64,
                                                         .kv_heads = 8,
                                                         .head_dim = 64,
                                                         .max_position_embeddings = 131072,
                                                         .hidden_act = nullptr,
                                                         .rope_theta = 150000.0,
                                                         .rms_norm_eps = 1e-5}),
                 .moe = {},
                 .mxfp4 = mxfp4};
  LlamaFamilyConfig& b = c.base;
  const Json with_rope = with_default_rope(f);
  b.rope = read_rope_config(JsonFields(with_rope, f.origin()), b.attention.head_dim,
                            b.max_position_embeddings, 150000.0);
  b.attention.qkv_bias = b.attention.o_bias = f.get_or<bool>("attention_bias", true);
  // layer_types, else GptOssConfig's: even layers slide, odd ones attend to everything. A null
  // sliding_window leaves the sliding layers without a size (transformers' cache fails on it).
  const bool windowed = !f.json().contains("sliding_window") || f.has("sliding_window");
  const int64_t window = f.get_or<int64_t>("sliding_window", 128);
  if (windowed && window <= 0)
    fail(f.origin(), ": field \"sliding_window\" is ", window, "; it must be positive");
  for (int64_t i = 0; i < b.num_layers; ++i) {
    bool sliding = i % 2 == 0;
    if (f.has("layer_types")) {
      const Json& types = f.at("layer_types");
      if (!types.is_array() || static_cast<int64_t>(types.size()) != b.num_layers)
        fail(f.origin(), ": field \"layer_types\" must list ", b.num_layers, " layer types");
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding = types[i] == "sliding_attention";
    }
    if (sliding && !windowed)
      fail(f.origin(), ": layer ", i, " is sliding_attention but field \"sliding_window\" is null");
    b.layer_windows[static_cast<size_t>(i)] = sliding ? window : 0;
  }
  c.moe = MoeSpec{.experts = read_int_alias(f, "num_local_experts", "num_experts", 128),
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 4),
                  .inter = b.intermediate_size,
                  .routing = graph::Routing::TopKSoftmax,
                  .glu = {.kind = graph::ExpertGlu::ClampedSwiglu,
                          .limit = static_cast<float>(f.get_or<double>("swiglu_limit", 7.0)),
                          .alpha = static_cast<float>(f.get_or<double>("swiglu_alpha", 1.702))}};
  check_moe_spec(ckpt, f, c.moe, {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  if (mxfp4) {
    // MXFP4 blocks run along gate_up's hidden_size inputs and down's intermediate_size ones.
    for (auto [name, v] :
         {std::pair{"hidden_size", b.hidden_size}, {"intermediate_size", c.moe.inter}})
      if (v % kMxfp4Block != 0)
        fail(f.origin(), ": field \"", name, "\" is ", v, ", not a multiple of the ", kMxfp4Block,
             " values of an MXFP4 block (quantization_config quant_method \"mxfp4\")");
  } else if (ckpt.has("model.layers.0.mlp.experts.gate_up_proj_blocks")) {
    fail(f.origin(),
         ": the checkpoint holds MXFP4 expert blocks "
         "(model.layers.0.mlp.experts.gate_up_proj_blocks) but config.json has no "
         "\"quantization_config\" with quant_method \"mxfp4\"");
  }
  return std::make_unique<GptOssModel>(ckpt, c, opts);
}

}  // namespace lathe
