#include "models/arch/llama_family.h"

#include <algorithm>

#include "core/error.h"
#include "models/decoder.h"

namespace lathe {

AttentionSpec layer_attention(const LlamaFamilyConfig& c, int64_t i) {
  AttentionSpec s = c.attention;
  s.window = c.layer_windows.at(i);
  if (!c.layer_rope.empty()) s.rope = c.layer_rope.at(i);
  return s;
}

Norm rms_norm_of(const LlamaFamilyConfig& c) {
  return Norm::rms(c.rms_norm_eps, c.norm_offset);
}

void ignore_layers_from(Weights& w, int64_t first) {
  const std::string prefix = "model.layers.";
  w.ignore_if([&](const std::string& name) {
    if (!name.starts_with(prefix)) return false;
    size_t end = prefix.size();
    int64_t layer = 0;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9' && layer < (1 << 20))
      layer = layer * 10 + (name[end++] - '0');
    return end > prefix.size() && end < name.size() && name[end] == '.' && layer >= first;
  });
}

namespace {

// transformers LlamaModel / LlamaDecoderLayer: x + attn(norm(x)), then x + mlp(norm(x)).
class LlamaFamilyModel : public Decoder {
 public:
  LlamaFamilyModel(const Checkpoint& ckpt, LlamaFamilyConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.rope);
    if (cfg_.query_rope) ropes_.emplace_back(*cfg_.query_rope);
    embed_scale_ = cfg_.embed_multiplier;
    const Norm rms = final_norm_ = rms_norm_of(cfg_);
    const int64_t h = cfg_.hidden_size;
    load(
        ckpt, opts, cfg_,
        [&](Weights& w, int64_t i, const std::string& p) {
          Layer l;
          l.spec = layer_attention(cfg_, i);
          l.attn_norm = rms.load(w, p + "input_layernorm.", h);
          l.attn = load_attention(w, p + "self_attn.", l.spec);
          l.mlp_norm = rms.load(w, p + "post_attention_layernorm.", h);
          if (cfg_.moe && cfg_.layer_moe.at(i))
            l.moe = load_moe(w, p + cfg_.moe_module, h, *cfg_.moe, cfg_.moe_names);
          else
            l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size,
                                   {.bias = cfg_.mlp_bias, .gated = cfg_.mlp_gated});
          layers_.push_back(std::move(l));
        },
        {.embed_rows = cfg_.embedding_rows},
        [&](Weights& w) {
          if (cfg_.extra_layers_ignored) ignore_layers_from(w, cfg_.num_layers);
        });
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return blocks::kv_layer_states(cfg_.attention, cfg_.layer_windows);
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    blocks::AttentionInputs ai = in.attention(i);
    if (cfg_.query_rope) ai.q_rope_tables = in.rope_tables[1];
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    a = blocks::self_attention(g, a, l.attn, l.spec, ai, p);
    x = add_residual(g, x, a);
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return add_residual(g, x,
                        l.moe ? blocks::moe(g, m, *l.moe, *cfg_.moe, p)
                              : blocks::gated_mlp(g, m, l.mlp, cfg_.mlp_act, p));
  }

  graph::Value head(graph::Builder& g, graph::Value x) const override {
    graph::Value logits = Decoder::head(g, x);
    // GraniteForCausalLM: logits / logits_scaling, as a multiplication by the f32 reciprocal
    // would differ in the last bit.
    return cfg_.logits_divisor != 1 ? g.divide(logits, cfg_.logits_divisor) : logits;
  }

 private:
  // GraniteDecoderLayer: residual + branch * residual_multiplier (1 for the others).
  graph::Value add_residual(graph::Builder& g, graph::Value x, graph::Value branch) const {
    if (cfg_.residual_multiplier != 1) branch = g.scale(branch, cfg_.residual_multiplier);
    return g.add(x, branch);
  }

  struct Layer {
    AttentionSpec spec;
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;  // instead of mlp on the layers that run experts
  };
  LlamaFamilyConfig cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> build_llama_family(const Checkpoint& ckpt, const LlamaFamilyConfig& cfg,
                                          const ModelOptions& opts) {
  return std::make_unique<LlamaFamilyModel>(ckpt, cfg, opts);
}

LlamaFamilyConfig read_llama_family_config(const Checkpoint& ckpt, const LlamaFamilyDefaults& d) {
  return read_llama_family_config(ckpt, JsonFields(ckpt.config(), ckpt.config_path()), d);
}

LlamaFamilyConfig read_llama_family_config(const Checkpoint& ckpt, const JsonFields& f,
                                           const LlamaFamilyDefaults& d) {
  LlamaFamilyConfig c;
  read_sizes(
      ckpt, f,
      {d.vocab_size, d.hidden_size, d.intermediate_size, d.num_layers, d.max_position_embeddings},
      c);
  c.rms_norm_eps = static_cast<float>(f.get_or<double>("rms_norm_eps", d.rms_norm_eps));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", d.tie_word_embeddings);
  c.mlp_bias = f.get_or<bool>("mlp_bias", false);

  if (d.hidden_act) {
    const std::string act = f.get_or<std::string>("hidden_act", d.hidden_act);
    if (act != d.hidden_act)
      fail(f.origin(), ": field \"hidden_act\" is \"", act, "\"; ", c.architecture,
           " in lathe implements \"", d.hidden_act, "\"");
    c.mlp_act = read_activation(f, "hidden_act", d.hidden_act, c.architecture);
  }

  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", d.heads);
  a.kv_heads = f.has("num_key_value_heads") ? f.get<int64_t>("num_key_value_heads")
                                            : d.kv_heads.value_or(a.heads);
  if (a.heads <= 0 || c.hidden_size <= 0)
    fail(f.origin(), ": num_attention_heads and hidden_size must be positive");
  a.head_dim =
      f.has("head_dim") ? f.get<int64_t>("head_dim") : d.head_dim.value_or(c.hidden_size / a.heads);
  a.norm_eps = c.rms_norm_eps;
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_key_value_heads", a.kv_heads},
                  {"head_dim", a.head_dim},
                  {"max_position_embeddings", c.max_position_embeddings}});
  if (a.heads % a.kv_heads != 0)
    fail(f.origin(), ": num_attention_heads ", a.heads,
         " is not a multiple of num_key_value_heads ", a.kv_heads);
  check_layer_count(ckpt, f, c.num_layers);
  c.layer_windows.assign(static_cast<size_t>(c.num_layers), 0);
  c.rope = read_rope_config(f, a.head_dim, c.max_position_embeddings, d.rope_theta);
  return c;
}

std::vector<int64_t> read_qwen_layer_windows(const JsonFields& f, int64_t num_layers) {
  const bool use = f.get_or<bool>("use_sliding_window", false);
  const int64_t window = f.get_or<int64_t>("sliding_window", 4096);
  const int64_t max_window_layers = f.get_or<int64_t>("max_window_layers", 28);
  std::vector<int64_t> windows(static_cast<size_t>(num_layers), 0);
  if (f.has("layer_types")) {
    const Json& types = f.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != num_layers)
      fail(f.origin(), ": field \"layer_types\" must list ", num_layers, " layer types");
    for (int64_t i = 0; i < num_layers; ++i) {
      const Json& t = types[i];
      if (t == "sliding_attention") {
        if (!use) continue;  // transformers drops the window unless use_sliding_window is set
        windows[i] = window;
      } else if (t != "full_attention") {
        fail(f.origin(), ": layer_types[", i, "] is ", t.dump(),
             "; lathe implements full_attention and sliding_attention");
      }
    }
    return windows;
  }
  if (use)
    // Qwen2Config: a layer slides when i >= max_window_layers, so a negative value means all.
    for (int64_t i = std::max<int64_t>(max_window_layers, 0); i < num_layers; ++i)
      windows[i] = window;
  return windows;
}

}  // namespace lathe
