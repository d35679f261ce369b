// NemotronHForCausalLM: transformers/models/nemotron_h (NemotronHConfig in
// configuration_nemotron_h.py, NemotronHModel in modeling_nemotron_h.py). Every layer is
// x + mixer(norm(x)) with one mixer of four kinds, by layers_block_type (or the legacy
// hybrid_override_pattern, one character per layer): a Mamba2 mixer (M), attention without
// rotary or biases (*), an ungated MLP with relu2 (-), or a mixture of ungated experts with a
// sigmoid router in groups and a shared expert (E).
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/mamba2_mixer.h"
#include "models/moe.h"
#include "models/registry.h"

namespace lathe {
namespace {

enum class Mixer : uint8_t { Mamba, Attention, Mlp, Moe };

struct NemotronHConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, max_position_embeddings = 0;
  int64_t intermediate_size = 0;
  float eps = 1e-5f;
  bool tie_word_embeddings = false, mlp_bias = false;
  graph::Activation mlp_act = graph::Activation::Relu2;
  std::vector<Mixer> mixers;
  AttentionSpec attention;
  Mamba2MixerSpec mamba;
  MoeSpec moe;
};

class NemotronHModel : public Decoder {
 public:
  NemotronHModel(const Checkpoint& ckpt, NemotronHConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const NemotronHConfig& c = cfg_;
    const int64_t h = c.hidden_size;
    const Norm rms = final_norm_ = Norm::rms(c.eps);
    load(
        ckpt, opts, c,
        [&](Weights& w, int64_t i, const std::string& p) {
          const std::string m = p + "mixer.";
          Layer l;
          l.norm = rms.load(w, p + "norm.", h);
          switch (c.mixers[static_cast<size_t>(i)]) {
            case Mixer::Mamba:
              l.mamba = load_mamba2_mixer(w, m, c.mamba);
              break;
            case Mixer::Attention:
              l.attn = load_attention(w, m, c.attention);
              break;
            case Mixer::Mlp:
              l.mlp = load_gated_mlp(w, m, h, c.intermediate_size,
                                     {.bias = c.mlp_bias, .gated = false});
              break;
            case Mixer::Moe:
              l.moe = load_moe(w, m, h, c.moe, {.shared = "shared_experts."});
              break;
          }
          layers_.push_back(std::move(l));
        },
        {.embed = "backbone.embeddings.weight",
         .layers = "backbone.layers.",
         .final_norm = "backbone.norm_f."},
        [](Weights& w) {
          // The multi-token prediction layers (num_nextn_predict_layers) are not part of the
          // model.
          w.ignore_if([](const std::string& name) { return name.starts_with("mtp."); });
        });
  }

  // Attention layers keep keys and values, Mamba2 layers their recurrent state, MLP and MoE
  // layers nothing.
  std::vector<LayerStateSpec> layer_states() const override {
    std::vector<LayerStateSpec> out = blocks::kv_layer_states(
        cfg_.attention, std::vector<int64_t>(static_cast<size_t>(cfg_.num_layers), 0));
    for (size_t i = 0; i < out.size(); ++i) {
      if (cfg_.mixers[i] == Mixer::Mamba) out[i] = mamba2_mixer_state(cfg_.mamba);
      if (cfg_.mixers[i] == Mixer::Mlp || cfg_.mixers[i] == Mixer::Moe)
        out[i] = {.kind = StateKind::Recurrent, .recurrent = {}};
    }
    return out;
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs&) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const NemotronHConfig& c = cfg_;
    const std::string p = layer_prefix(i);
    // The mixer's output is "<prefix>attn_out" for the token mixers, "<prefix>mlp_out" for
    // the others, as module_outputs names transformers' `mixer` by what it is.
    switch (c.mixers[static_cast<size_t>(i)]) {
      case Mixer::Mamba:
        return g.add(x, blocks::mamba2_mixer(g, g.name(blocks::norm(g, x, l.norm), p + "attn_norm"),
                                             l.mamba, c.mamba, i, p));
      case Mixer::Attention:
        return g.add(
            x, blocks::self_attention(g, g.name(blocks::norm(g, x, l.norm), p + "attn_norm"),
                                      l.attn, c.attention, {.rope_tables = {}, .layer = i}, p));
      case Mixer::Mlp:
        return g.add(x, blocks::gated_mlp(g, g.name(blocks::norm(g, x, l.norm), p + "mlp_norm"),
                                          l.mlp, c.mlp_act, p));
      case Mixer::Moe:
        return g.add(x, blocks::moe(g, g.name(blocks::norm(g, x, l.norm), p + "mlp_norm"), *l.moe,
                                    c.moe, p));
    }
    fail("internal: NemotronH layer ", i, " has no mixer");
  }

 private:
  struct Layer {
    Norm norm;
    Mamba2MixerWeights mamba;
    AttentionWeights attn;
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;
  };
  NemotronHConfig cfg_;
  std::vector<Layer> layers_;
};

// layers_block_type (layer_types, its attribute name) or, without it, hybrid_override_pattern
// (M, *, -, E); NemotronHConfig's default is one layer of each.
std::vector<Mixer> read_mixers(const JsonFields& f) {
  std::vector<std::string> types;
  const char* field = f.has("layers_block_type") ? "layers_block_type" : "layer_types";
  if (f.has(field)) {
    const Json& t = f.at(field);
    if (!t.is_array()) fail(f.origin(), ": field \"", field, "\" must be a list of layer types");
    for (const Json& j : t) {
      if (!j.is_string()) fail(f.origin(), ": field \"", field, "\" holds ", j.dump());
      types.push_back(j.get<std::string>());
    }
  } else if (f.has("hybrid_override_pattern")) {
    field = "hybrid_override_pattern";
    for (char ch : f.get<std::string>("hybrid_override_pattern")) {
      switch (ch) {
        case 'M':
          types.emplace_back("linear_attention");
          break;
        case '*':
          types.emplace_back("full_attention");
          break;
        case '-':
          types.emplace_back("mlp");
          break;
        case 'E':
          types.emplace_back("moe");
          break;
        default:
          fail(f.origin(), ": field \"hybrid_override_pattern\" holds '", std::string(1, ch),
               "'; NemotronH's layers are M, *, - and E");
      }
    }
  } else {
    types = {"linear_attention", "moe", "full_attention", "mlp"};
  }
  if (types.empty() || types.size() > 4096)
    fail(f.origin(), ": field \"", field, "\" lists ", types.size(), " layers");
  std::vector<Mixer> mixers;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& t = types[i];
    if (t == "linear_attention" || t == "mamba") {
      mixers.push_back(Mixer::Mamba);
    } else if (t == "full_attention" || t == "attention") {
      mixers.push_back(Mixer::Attention);
    } else if (t == "mlp") {
      mixers.push_back(Mixer::Mlp);
    } else if (t == "moe") {
      mixers.push_back(Mixer::Moe);
    } else {
      fail(f.origin(), ": ", field, "[", i, "] is \"", t,
           "\"; NemotronH's layers are linear_attention, full_attention, mlp and moe");
    }
  }
  return mixers;
}

// NemotronHConfig.__post_init__ takes a legacy name over the current one.
template <class T>
T legacy_or(const JsonFields& f, const char* legacy, const char* name, T fallback) {
  return f.has(legacy) ? f.get<T>(legacy) : f.get_or<T>(name, fallback);
}

}  // namespace

std::unique_ptr<Model> load_nemotron_h(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // NemotronHConfig defaults.
  NemotronHConfig c;
  c.architecture = "NemotronHForCausalLM";
  c.vocab_size = f.get_or<int64_t>("vocab_size", 131072);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 4096);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 4096);
  c.intermediate_size = f.get_or<int64_t>("intermediate_size", 21504);
  c.eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  c.mlp_bias = f.get_or<bool>("mlp_bias", false);
  c.mlp_act = read_activation(f, "mlp_hidden_act", "relu2", c.architecture);
  c.mixers = read_mixers(f);
  c.num_layers = static_cast<int64_t>(c.mixers.size());
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"max_position_embeddings", c.max_position_embeddings},
                  {"intermediate_size", c.intermediate_size}});
  check_layer_count(ckpt, f, c.num_layers);
  if (f.has("sliding_window"))
    fail(f.origin(), ": field \"sliding_window\" is ", f.at("sliding_window").dump(),
         "; lathe implements NemotronH's attention over every earlier position");

  // NemotronHAttention: no rotary, no biases (attention_bias is not read), head_dim^-0.5.
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", 32);
  a.kv_heads = f.get_or<int64_t>("num_key_value_heads", 8);
  a.head_dim = f.get_or<int64_t>("head_dim", 128);
  a.rope = false;
  check_sizes(f, {{"num_attention_heads", a.heads},
                  {"num_key_value_heads", a.kv_heads},
                  {"head_dim", a.head_dim}});
  if (a.heads % a.kv_heads != 0)
    fail(f.origin(), ": num_attention_heads ", a.heads,
         " is not a multiple of num_key_value_heads ", a.kv_heads);

  // NemotronHMamba2Mixer: dt clamped to [time_step_min, inf) (time_step_limit is not read).
  Mamba2MixerSpec& m = c.mamba;
  m.hidden = c.hidden_size;
  m.heads = f.get_or<int64_t>("mamba_num_heads", 128);
  m.head_dim = f.get_or<int64_t>("mamba_head_dim", 64);
  m.state_size = f.get_or<int64_t>("ssm_state_size", 128);
  m.n_groups = legacy_or<int64_t>(f, "mamba_n_groups", "n_groups", 8);
  m.conv_kernel = legacy_or<int64_t>(f, "mamba_d_conv", "conv_kernel", 4);
  m.use_conv_bias = legacy_or<bool>(f, "mamba_conv_bias", "use_conv_bias", true);
  m.in_bias = m.out_bias = f.get_or<bool>("use_bias", false);
  m.eps = c.eps;
  m.act = read_activation(f, "mamba_hidden_act", "silu", c.architecture);
  m.dt_min = static_cast<float>(legacy_or<double>(f, "mamba_dt_min", "time_step_min", 0.001));
  m.dt_max = std::numeric_limits<float>::infinity();
  if (!(m.dt_min >= 0))
    fail(f.origin(), ": field \"time_step_min\" is ", m.dt_min, "; it must be at least 0");
  check_mamba2_mixer_spec(
      f, m, {"mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel"});

  // NemotronHMoE: NemotronHTopkRouter (DeepseekV3's), ungated relu2 experts, a shared expert.
  if (f.has("moe_latent_size"))
    fail(f.origin(), ": field \"moe_latent_size\" is ", f.at("moe_latent_size").dump(),
         "; lathe does not implement NemotronH's latent expert projections yet");
  MoeSpec& e = c.moe;
  e.experts = legacy_or<int64_t>(f, "num_local_experts", "n_routed_experts", 8);
  e.top_k = f.get_or<int64_t>("num_experts_per_tok", 2);
  e.inter = f.get_or<int64_t>("moe_intermediate_size", 7688);
  e.routing = graph::Routing::Sigmoid;
  e.norm_topk = f.get_or<bool>("norm_topk_prob", true);
  e.norm_eps = 1e-20f;
  e.scale = static_cast<float>(f.get_or<double>("routed_scaling_factor", 1.0));
  e.groups = f.get_or<int64_t>("n_group", 1);
  e.top_groups = f.get_or<int64_t>("topk_group", 1);
  e.correction_bias = true;
  e.act = c.mlp_act;
  e.gated = false;
  e.shared_inter = f.get_or<int64_t>("moe_shared_expert_intermediate_size", 7688);
  if (std::find(c.mixers.begin(), c.mixers.end(), Mixer::Moe) != c.mixers.end()) {
    check_moe_spec(ckpt, f, e,
                   {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
    check_sizes(f, {{"moe_shared_expert_intermediate_size", e.shared_inter},
                    {"n_group", e.groups},
                    {"topk_group", e.top_groups}});
  }
  return std::make_unique<NemotronHModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
