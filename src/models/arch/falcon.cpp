// FalconForCausalLM: transformers/models/falcon (configuration_falcon.py, modeling_falcon.py).
// LayerNorm blocks in three layouts: new_decoder_architecture (ln_attn and ln_mlp feeding
// parallel attention and MLP, grouped key/value heads), the original parallel block (one
// input_layernorm, multi-query attention), and a sequential pre-norm block. Rotary positions,
// or ALiBi when alibi is set. The fused query_key_value is split at load in the layout each
// variant views it in; a GELU MLP of ffn_hidden_size; one bias switch for every linear.
#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

enum class FalconBlock {
  TwoNorms,    // new_decoder_architecture: x + attn(ln_attn(x)) + mlp(ln_mlp(x))
  Parallel,    // parallel_attn: n = input_layernorm(x); x + attn(n) + mlp(n)
  Sequential,  // x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm(x))
};

struct FalconConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, ffn_hidden_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float layer_norm_eps = 1e-5f;
  bool bias = false, alibi = false, tie_word_embeddings = true;
  FalconBlock block = FalconBlock::Parallel;
  int64_t qkv_groups = 1;  // how query_key_value's rows are grouped, see split_fused_qkv
  graph::Activation act = graph::Activation::Gelu;
  AttentionSpec attention;
  RopeConfig rope;
};

// transformers FalconModel / FalconDecoderLayer.
class FalconModel : public LayerStack {
 public:
  FalconModel(const Checkpoint& ckpt, const FalconConfig& cfg, const ModelOptions& opts)
      : alibi_(cfg.alibi) {
    if (alibi_)
      slopes_ = alibi_slopes_tensor(cfg.attention.heads);
    else
      ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size, ffn = cfg.ffn_hidden_size;
    const AttentionSpec& s = cfg.attention;
    const bool bias = cfg.bias;
    const Norm ln = final_norm_ = Norm::layer(cfg.layer_norm_eps);
    const std::string base = base_model_prefix(ckpt, "transformer.", "word_embeddings.weight");
    load(ckpt, opts, cfg,
         [&](Weights& w, int64_t, const std::string& p) {
           DecoderLayer l{.spec = s, .act = cfg.act};
           switch (cfg.block) {
             case FalconBlock::TwoNorms:
               l.parallel = true;
               l.load_norms(w, p, ln, h, {.attn_norm = "ln_attn.", .mlp_norm = "ln_mlp."});
               break;
             case FalconBlock::Parallel:
               l.parallel = true;
               l.load_norms(w, p, ln, h, {.attn_norm = "input_layernorm."});
               break;
             case FalconBlock::Sequential:
               l.load_norms(
                   w, p, ln, h,
                   {.attn_norm = "input_layernorm.", .mlp_norm = "post_attention_layernorm."});
               break;
           }
           l.attn = load_fused_attention(w, p + "self_attention.query_key_value.",
                                         p + "self_attention.dense.", s, cfg.qkv_groups, bias);
           l.mlp = load_linear_mlp(w, p + "mlp.", "dense_h_to_4h", "dense_4h_to_h", h, ffn, bias);
           layers_.push_back(std::move(l));
         },
         {.embed = base + "word_embeddings.weight",
          .layers = base + "h.",
          .final_norm = base + "ln_f."});
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    // FalconAttention: rotary, or with alibi FalconModel's bias (build_alibi_tensor's bfloat16
    // slopes times bfloat16 key positions, divided by sqrt(head_dim)) added to the scaled
    // scores; the roundings are kept, as they change the scores.
    blocks::AttentionInputs ai{.rope_tables = {}, .layer = i};
    if (alibi_) {
      ai.bias = graph::PositionBias::AlibiFalcon;
      ai.slopes = slopes_;
    } else {
      ai.rope_tables = in.rope_tables[0];
    }
    return layers_.at(static_cast<size_t>(i)).forward(g, x, ai, layer_prefix(i));
  }

 private:
  bool alibi_;
  Tensor slopes_;  // alibi only
};

}  // namespace

std::unique_ptr<Model> load_falcon(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // FalconConfig defaults; n_embed, when given, replaces hidden_size.
  FalconConfig c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", 65024);
  c.hidden_size = read_int_alias(f, "n_embed", "hidden_size", 4544);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 32);
  c.ffn_hidden_size = f.get_or<int64_t>("ffn_hidden_size", 4 * c.hidden_size);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 2048);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  c.bias = f.get_or<bool>("bias", false);
  c.alibi = f.get_or<bool>("alibi", false);
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  c.act = read_activation(f, "activation", "gelu", c.architecture);

  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", 71);
  if (a.heads <= 0 || c.hidden_size <= 0 || c.hidden_size % a.heads != 0)
    fail(f.origin(), ": hidden_size ", c.hidden_size,
         " is not a positive multiple of num_attention_heads ", a.heads);
  a.head_dim = c.hidden_size / a.heads;
  a.rope = !c.alibi;
  const int64_t num_kv_heads = f.get_or<int64_t>("num_kv_heads", a.heads);

  // FalconAttention / FalconDecoderLayer: which block and which query_key_value layout.
  const bool new_arch = f.get_or<bool>("new_decoder_architecture", false);
  const bool multi_query = f.get_or<bool>("multi_query", true);
  const bool parallel = f.get_or<bool>("parallel_attn", true);
  const std::optional<int64_t> num_ln = f.get_optional<int64_t>("num_ln_in_parallel_attn");
  if (new_arch) {
    // Viewed as (num_kv_heads, heads / num_kv_heads + 2, head_dim).
    if (num_kv_heads <= 0 || a.heads % num_kv_heads != 0)
      fail(f.origin(), ": num_attention_heads ", a.heads, " is not a multiple of num_kv_heads ",
           num_kv_heads);
    a.kv_heads = c.qkv_groups = num_kv_heads;
    // transformers builds only these: two norms (the default), or one with parallel_attn.
    if (!parallel)
      fail(f.origin(), ": field \"parallel_attn\" is false with new_decoder_architecture, a ",
           "layout transformers' FalconDecoderLayer does not run");
    if (num_ln.value_or(2) != 1 && num_ln.value_or(2) != 2)
      fail(f.origin(), ": field \"num_ln_in_parallel_attn\" is ", *num_ln, "; ", c.architecture,
           " runs 1 or 2");
    c.block = num_ln.value_or(2) == 2 ? FalconBlock::TwoNorms : FalconBlock::Parallel;
  } else {
    if (multi_query) {
      a.kv_heads = 1, c.qkv_groups = 1;  // viewed as (heads + 2, head_dim): [q.. | k | v]
    } else {
      if (num_kv_heads != a.heads)
        fail(f.origin(), ": field \"num_kv_heads\" is ", num_kv_heads, "; ", c.architecture,
             " without new_decoder_architecture or multi_query has one per head (", a.heads, ")");
      a.kv_heads = c.qkv_groups = a.heads;  // viewed as (heads, 3, head_dim)
    }
    if (parallel && num_ln == 2)
      fail(f.origin(), ": field \"num_ln_in_parallel_attn\" is 2 without ",
           "new_decoder_architecture, a layout transformers' FalconDecoderLayer does not run");
    c.block = parallel ? FalconBlock::Parallel : FalconBlock::Sequential;
  }
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"ffn_hidden_size", c.ffn_hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"max_position_embeddings", c.max_position_embeddings}});
  c.rope = read_rope_config(f, a.head_dim, c.max_position_embeddings);
  return std::make_unique<FalconModel>(ckpt, c, opts);
}

}  // namespace lathe
