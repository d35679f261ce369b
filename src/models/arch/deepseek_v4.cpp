// DeepseekV4ForCausalLM's config and tensors (models/arch/deepseek_v4.h; the computation they feed
// is described in docs/deepseek-v4.md).
#include "models/arch/deepseek_v4.h"

#include <cstring>

#include "core/error.h"
#include "models/config_fields.h"
#include "models/weights.h"

namespace lathe {
namespace {

// DeepseekV4Config's class defaults.
constexpr int64_t kVocab = 129280, kHidden = 4096, kInter = 2048, kLayers = 43, kHeads = 64;
constexpr int64_t kHeadDim = 512, kQLora = 1024, kTopK = 6, kExperts = 256;
constexpr int64_t kMaxPositions = 1048576, kHcMult = 4, kSinkhorn = 20, kWindow = 128;
constexpr int64_t kOGroups = 8, kOLora = 1024, kIndexHeads = 64, kIndexDim = 128;
constexpr int64_t kIndexTopK = 512, kCsaRate = 4, kHcaRate = 128, kHashLayers = 3;
constexpr double kRopeTheta = 10000.0, kCompressTheta = 160000.0;

// A list field of one string per layer, each one of `allowed`; returns their indices.
std::vector<size_t> read_layer_list(const JsonFields& f, const char* field, int64_t layers,
                                    const std::vector<std::string>& allowed) {
  const Json& list = f.at(field);
  if (!list.is_array() || static_cast<int64_t>(list.size()) != layers)
    fail(f.origin(), ": field \"", field, "\" must list ", layers,
         " layer types (num_hidden_layers)");
  std::vector<size_t> out;
  for (int64_t i = 0; i < layers; ++i) {
    const Json& v = list[static_cast<size_t>(i)];
    size_t k = 0;
    while (k < allowed.size() && !(v.is_string() && v.get<std::string>() == allowed[k])) ++k;
    if (k == allowed.size()) {
      std::string names;
      for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
      fail(f.origin(), ": field \"", field, "\"[", i, "] is ", v.dump(), " (DeepseekV4 has ", names,
           ")");
    }
    out.push_back(k);
  }
  return out;
}

// compress_rates {"compressed_sparse_attention": m, "heavily_compressed_attention": m'}, the
// legacy compress_rate_csa / compress_rate_hca overriding them.
std::pair<int64_t, int64_t> read_compress_rates(const JsonFields& f) {
  int64_t csa = kCsaRate, hca = kHcaRate;
  if (f.has("compress_rates")) {
    if (!f.at("compress_rates").is_object())
      fail(f.origin(), ": field \"compress_rates\" must be an object");
    JsonFields r(f.at("compress_rates"), f.origin() + " (compress_rates)");
    csa = r.get_or<int64_t>("compressed_sparse_attention", csa);
    hca = r.get_or<int64_t>("heavily_compressed_attention", hca);
  }
  csa = f.get_or<int64_t>("compress_rate_csa", csa);
  hca = f.get_or<int64_t>("compress_rate_hca", hca);
  return {csa, hca};
}

// The attention schedule: layer_types, else the legacy compress_ratios (0 sliding, 4 CSA,
// 128 HCA), else DeepseekV4Config's default (two HCA layers, then HCA and CSA alternating).
std::vector<Dsv4Attention> read_layer_attention(const JsonFields& f, int64_t layers) {
  std::vector<Dsv4Attention> out;
  if (f.has("layer_types")) {
    for (size_t k : read_layer_list(
             f, "layer_types", layers,
             {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"}))
      out.push_back(static_cast<Dsv4Attention>(k));
    return out;
  }
  if (f.has("compress_ratios")) {
    const Json& list = f.at("compress_ratios");
    if (!list.is_array() || static_cast<int64_t>(list.size()) < layers)
      fail(f.origin(), ": field \"compress_ratios\" must list at least ", layers, " ratios");
    for (int64_t i = 0; i < layers; ++i) {
      const Json& v = list[static_cast<size_t>(i)];
      if (v == 0)
        out.push_back(Dsv4Attention::Sliding);
      else if (v == 4)
        out.push_back(Dsv4Attention::Csa);
      else if (v == 128)
        out.push_back(Dsv4Attention::Hca);
      else
        fail(f.origin(), ": field \"compress_ratios\"[", i, "] is ", v.dump(),
             " (DeepseekV4Config maps 0, 4 and 128)");
    }
    return out;
  }
  for (int64_t i = 0; i < layers; ++i)
    out.push_back(i < 2 || (i - 2) % 2 == 0 ? Dsv4Attention::Hca : Dsv4Attention::Csa);
  return out;
}

// mlp_layer_types, else the first num_hash_layers (default 3) hash-routed.
std::vector<bool> read_layer_hash(const JsonFields& f, int64_t layers) {
  std::vector<bool> out;
  if (f.has("mlp_layer_types")) {
    for (size_t k : read_layer_list(f, "mlp_layer_types", layers, {"hash_moe", "moe"}))
      out.push_back(k == 0);
    return out;
  }
  const int64_t hash = f.get_or<int64_t>("num_hash_layers", kHashLayers);
  for (int64_t i = 0; i < layers; ++i) out.push_back(i < hash);
  return out;
}

// The "main" (sliding layers) and "compress" rotary of DeepseekV4Config.__post_init__: main
// is the default rotary at rope_theta; compress takes rope_scaling (or rope_parameters) at
// compress_rope_theta, and yarn there with attention_factor 1 unless given. A
// rope_parameters already nested as {"main": ..., "compress": ...} is read as it is.
void read_ropes(const JsonFields& f, Dsv4Config& c, double partial) {
  const Json* main = nullptr;
  const Json* compress = nullptr;
  if (f.has("rope_parameters") && f.at("rope_parameters").is_object() &&
      f.at("rope_parameters").contains("main") && f.at("rope_parameters").contains("compress")) {
    main = &f.at("rope_parameters")["main"];
    compress = &f.at("rope_parameters")["compress"];
  }
  Json m = main ? *main
                : Json{{"rope_type", "default"},
                       {"rope_theta", f.get_or<double>("rope_theta", kRopeTheta)}};
  Json k = Json::object();
  if (compress) {
    k = *compress;
  } else {
    for (const char* field : {"rope_parameters", "rope_scaling"})
      if (f.has(field)) {
        if (!f.at(field).is_object()) fail(f.origin(), ": field \"", field, "\" must be an object");
        for (const auto& [key, v] : f.at(field).items())
          if (key != "main" && key != "compress") k[key] = v;
      }
    k["rope_theta"] = f.get_or<double>("compress_rope_theta", kCompressTheta);
    if (k.contains("type") && !k.contains("rope_type")) k["rope_type"] = k["type"];
    if (!k.contains("rope_type")) k["rope_type"] = "default";
    if (k["rope_type"] == "yarn" && !k.contains("attention_factor")) k["attention_factor"] = 1.0;
  }
  for (Json* p : {&m, &k})
    if (p->is_object() && !p->contains("partial_rotary_factor"))
      (*p)["partial_rotary_factor"] = partial;
  const Json main_cfg = {{"rope_parameters", m}};
  const Json compress_cfg = {{"rope_parameters", k}};
  c.main_rope = read_rope_config(JsonFields(main_cfg, f.origin() + " (main rotary)"), c.head_dim,
                                 c.max_position_embeddings);
  c.compress_rope = read_rope_config(JsonFields(compress_cfg, f.origin() + " (compress rotary)"),
                                     c.head_dim, c.max_position_embeddings);
  if (c.main_rope.rot_dim != c.rope_dim || c.compress_rope.rot_dim != c.rope_dim)
    fail(f.origin(), ": the main and compress rotary must rotate qk_rope_head_dim (", c.rope_dim,
         ") dims; rope_parameters gives ", c.main_rope.rot_dim, " and ", c.compress_rope.rot_dim);
}

// The name prefixes of the two checkpoint layouts.
struct Names {
  std::string layers, embed, norm, hc_fn, hc_base, hc_scale;
};

Names checkpoint_names(const Weights& w) {
  if (w.has("model.embed_tokens.weight"))
    return {"model.layers.",       "model.embed_tokens.weight", "model.norm.weight",
            "model.hc_head.hc_fn", "model.hc_head.hc_base",     "model.hc_head.hc_scale"};
  return {"layers.", "embed.weight", "norm.weight", "hc_head_fn", "hc_head_base", "hc_head_scale"};
}

Dsv4Compressor load_compressor(Weights& w, const std::string& p, int64_t hidden, int64_t dim,
                               int64_t series, int64_t rate) {
  return {.wkv = w.matrix(p + "wkv.weight", {series * dim, hidden}),
          .wgate = w.matrix(p + "wgate.weight", {series * dim, hidden}),
          .ape = w.vector(p + "ape", {rate, series * dim}),
          .norm = w.vector(p + "norm.weight", {dim})};
}

// The hash router's tid2eid [vocab, top_k], I32 or I64 (transformers holds it int64), each id
// checked against the experts.
std::vector<int32_t> load_tid2eid(const Checkpoint& ckpt, Weights& w, const std::string& name,
                                  const Dsv4Config& c) {
  w.ignore(name);
  if (!ckpt.has(name))
    fail(ckpt.dir().string(), ": missing tensor ", name, " (the hash router's token -> experts)");
  const SafetensorsEntry& e = ckpt.entry(name);
  if (e.shape != Shape{c.vocab_size, c.top_k})
    fail("tensor \"", name, "\" in ", ckpt.file_of(name), " has shape ", shape_str(e.shape),
         ", expected ", shape_str({c.vocab_size, c.top_k}));
  const std::span<const uint8_t> bytes = ckpt.bytes(name);
  const size_t n = static_cast<size_t>(c.vocab_size * c.top_k);
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t v = 0;
    if (e.dtype_name == "I32") {
      int32_t x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      v = x;
    } else if (e.dtype_name == "I64") {
      std::memcpy(&v, bytes.data() + 8 * i, 8);
    } else {
      fail("tensor \"", name, "\" in ", ckpt.file_of(name), " is ", e.dtype_name,
           ", expected I32 or I64 expert ids");
    }
    if (v < 0 || v >= c.experts)
      fail("tensor \"", name, "\" in ", ckpt.file_of(name), " holds expert ", v, " at ", i,
           ", outside the ", c.experts, " experts");
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

}  // namespace

Dsv4Config read_deepseek_v4_config(const Checkpoint& ckpt) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  Dsv4Config c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", kVocab);
  c.hidden_size = f.get_or<int64_t>("hidden_size", kHidden);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", kLayers);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", kMaxPositions);
  c.heads = f.get_or<int64_t>("num_attention_heads", kHeads);
  c.head_dim = f.get_or<int64_t>("head_dim", kHeadDim);
  c.q_lora_rank = f.get_or<int64_t>("q_lora_rank", kQLora);
  c.o_groups = f.get_or<int64_t>("o_groups", kOGroups);
  c.o_lora_rank = f.get_or<int64_t>("o_lora_rank", kOLora);
  c.experts = f.get_or<int64_t>("n_routed_experts", kExperts);
  c.top_k = f.get_or<int64_t>("num_experts_per_tok", kTopK);
  c.inter = f.get_or<int64_t>("moe_intermediate_size", kInter);
  c.routed_scaling_factor = static_cast<float>(f.get_or<double>("routed_scaling_factor", 1.5));
  c.swiglu_limit = static_cast<float>(f.get_or<double>("swiglu_limit", 10.0));
  c.hc_mult = f.get_or<int64_t>("hc_mult", kHcMult);
  c.hc_sinkhorn_iters = f.get_or<int64_t>("hc_sinkhorn_iters", kSinkhorn);
  c.hc_eps = static_cast<float>(f.get_or<double>("hc_eps", 1e-6));
  c.rms_norm_eps = static_cast<float>(f.get_or<double>("rms_norm_eps", 1e-6));
  c.sliding_window = f.get_or<int64_t>("sliding_window", kWindow);
  c.index_heads = f.get_or<int64_t>("index_n_heads", kIndexHeads);
  c.index_head_dim = f.get_or<int64_t>("index_head_dim", kIndexDim);
  c.index_topk = f.get_or<int64_t>("index_topk", kIndexTopK);
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  std::tie(c.csa_rate, c.hca_rate) = read_compress_rates(f);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"max_position_embeddings", c.max_position_embeddings},
                  {"num_attention_heads", c.heads},
                  {"head_dim", c.head_dim},
                  {"q_lora_rank", c.q_lora_rank},
                  {"o_groups", c.o_groups},
                  {"o_lora_rank", c.o_lora_rank},
                  {"n_routed_experts", c.experts},
                  {"num_experts_per_tok", c.top_k},
                  {"moe_intermediate_size", c.inter},
                  {"hc_mult", c.hc_mult},
                  {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
                  {"sliding_window", c.sliding_window},
                  {"index_n_heads", c.index_heads},
                  {"index_head_dim", c.index_head_dim},
                  {"index_topk", c.index_topk},
                  {"compress_rates (compressed_sparse_attention)", c.csa_rate},
                  {"compress_rates (heavily_compressed_attention)", c.hca_rate}});
  check_layer_count(ckpt, f, c.num_layers);
  // Shared-KV multi-query attention: one key (= value) head.
  if (f.get_or<int64_t>("num_key_value_heads", 1) != 1)
    fail(f.origin(), ": field \"num_key_value_heads\" is ", f.get<int64_t>("num_key_value_heads"),
         "; DeepseekV4Attention has one shared KV head");
  if (c.top_k > c.experts)
    fail(f.origin(), ": field \"num_experts_per_tok\" is ", c.top_k, ", more than the ", c.experts,
         " experts (n_routed_experts)");
  if ((c.heads * c.head_dim) % c.o_groups != 0)
    fail(f.origin(), ": field \"o_groups\" is ", c.o_groups, ", which does not divide the ",
         c.heads * c.head_dim, " attention outputs (num_attention_heads * head_dim)");
  const std::string scoring = f.get_or<std::string>("scoring_func", "sqrtsoftplus");
  if (scoring != "sqrtsoftplus")
    fail(f.origin(), ": field \"scoring_func\" is \"", scoring,
         "\"; lathe implements DeepseekV4's sqrtsoftplus router");
  const std::string act = f.get_or<std::string>("hidden_act", "silu");
  if (act != "silu")
    fail(f.origin(), ": field \"hidden_act\" is \"", act,
         "\"; lathe implements DeepseekV4's clamped SiLU gate");
  // partial_rotary_factor, else the legacy qk_rope_head_dim / head_dim, else 64 / 512.
  const double partial = f.has("partial_rotary_factor") ? f.get<double>("partial_rotary_factor")
                         : f.has("qk_rope_head_dim")
                             ? static_cast<double>(f.get<int64_t>("qk_rope_head_dim")) /
                                   static_cast<double>(c.head_dim)
                             : 64.0 / 512.0;
  c.rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    fail(f.origin(), ": qk_rope_head_dim (head_dim * partial_rotary_factor) is ", c.rope_dim,
         "; it must be even and within head_dim ", c.head_dim);
  read_ropes(f, c, partial);
  c.layer_attention = read_layer_attention(f, c.num_layers);
  c.layer_hash = read_layer_hash(f, c.num_layers);
  return c;
}

Dsv4Weights load_deepseek_v4_weights(const Checkpoint& ckpt, const Dsv4Config& c,
                                     std::optional<DType> matrix_dtype, bool fp8_native) {
  Weights w(ckpt, matrix_dtype, fp8_native);
  const Names names = checkpoint_names(w);
  const int64_t h = c.hidden_size, hd = c.head_dim, hc = c.hc_mult;
  const int64_t mixes = (2 + hc) * hc;
  Dsv4Weights out;
  out.embed = w.matrix(names.embed, {c.vocab_size, h});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = cat(names.layers, i, ".");
    const std::string a = p + "attn.";
    Dsv4Layer l;
    l.wq_a = w.matrix(a + "wq_a.weight", {c.q_lora_rank, h});
    l.q_norm = w.vector(a + "q_norm.weight", {c.q_lora_rank});
    l.wq_b = w.matrix(a + "wq_b.weight", {c.heads * hd, c.q_lora_rank});
    l.wkv = w.matrix(a + "wkv.weight", {hd, h});
    l.kv_norm = w.vector(a + "norm.weight", {hd});
    l.wo_a = w.matrix(a + "wo_a.weight", {c.o_groups * c.o_lora_rank, c.heads * hd / c.o_groups});
    l.wo_b = w.matrix(a + "wo_b.weight", {h, c.o_groups * c.o_lora_rank});
    l.sinks = w.vector(a + "attn_sink", {c.heads});
    const Dsv4Attention kind = c.layer_attention[static_cast<size_t>(i)];
    if (kind == Dsv4Attention::Csa) {
      l.compressor = load_compressor(w, a + "compressor.", h, hd, 2, c.csa_rate);
      l.index_compressor =
          load_compressor(w, a + "indexer.compressor.", h, c.index_head_dim, 2, c.csa_rate);
      l.index_wq_b =
          w.matrix(a + "indexer.wq_b.weight", {c.index_heads * c.index_head_dim, c.q_lora_rank});
      l.index_weights_proj = w.matrix(a + "indexer.weights_proj.weight", {c.index_heads, h});
    } else if (kind == Dsv4Attention::Hca) {
      l.compressor = load_compressor(w, a + "compressor.", h, hd, 1, c.hca_rate);
    }
    l.attn_norm = w.vector(p + "attn_norm.weight", {h});
    l.ffn_norm = w.vector(p + "ffn_norm.weight", {h});
    // The hyper-connections stay F32 (transformers' _keep_in_fp32_modules_strict).
    l.hc_attn_fn = w.vector(p + "hc_attn_fn", {mixes, hc * h});
    l.hc_attn_base = w.vector(p + "hc_attn_base", {mixes});
    l.hc_attn_scale = w.vector(p + "hc_attn_scale", {3});
    l.hc_ffn_fn = w.vector(p + "hc_ffn_fn", {mixes, hc * h});
    l.hc_ffn_base = w.vector(p + "hc_ffn_base", {mixes});
    l.hc_ffn_scale = w.vector(p + "hc_ffn_scale", {3});
    const std::string f = p + "ffn.";
    l.router = w.matrix(f + "gate.weight", {c.experts, h});
    if (c.layer_hash[static_cast<size_t>(i)])
      l.tid2eid = load_tid2eid(ckpt, w, f + "gate.tid2eid", c);
    else
      l.correction_bias = w.vector(f + "gate.bias", {c.experts});
    {  // the routed experts stay mapped (models/moe.h)
      const Weights::KeepMapped mapped(w);
      for (int64_t e = 0; e < c.experts; ++e) {
        const std::string x = cat(f, "experts.", e, ".");
        l.experts.push_back({.gate = w.matrix(x + "w1.weight", {c.inter, h}),
                             .up = w.matrix(x + "w3.weight", {c.inter, h}),
                             .down = w.matrix(x + "w2.weight", {h, c.inter})});
      }
    }
    l.shared = {.gate = w.matrix(f + "shared_experts.w1.weight", {c.inter, h}),
                .up = w.matrix(f + "shared_experts.w3.weight", {c.inter, h}),
                .down = w.matrix(f + "shared_experts.w2.weight", {h, c.inter})};
    out.layers.push_back(std::move(l));
  }
  out.final_norm = w.vector(names.norm, {h});
  out.hc_head_fn = w.vector(names.hc_fn, {hc, hc * h});
  out.hc_head_base = w.vector(names.hc_base, {hc});
  out.hc_head_scale = w.vector(names.hc_scale, {1});
  out.lm_head = c.tie_word_embeddings ? out.embed : w.matrix("head.weight", {c.vocab_size, h});
  // DeepSeek's multi-token-prediction layers (transformers' _keys_to_ignore_on_load_unexpected).
  w.ignore_if([](const std::string& n) { return n.rfind("mtp.", 0) == 0; });
  w.finish(c.architecture);
  out.matrix_dtype = w.matrix_dtype();
  return out;
}

}  // namespace lathe
