// DeepseekV4ForCausalLM's graph, beside transformers' modeling_deepseek_v4.py: the residual
// is hc_mult streams [n, hc * hidden], mixed in and out of each block by hyper-connections;
// attention is shared-KV MQA over a sliding window of keys plus, on CSA and HCA layers, the
// layer's compressed entries (CSA: those its indexer picks), in one softmax with sinks; the
// MLP is a mixture of experts routed by sqrt(softplus) scores or by a token-id hash, plus a
// shared expert. Config and tensors: models/deepseek_v4.{h,cpp}.
#include <cmath>

#include "core/error.h"
#include "models/arch/deepseek_v4.h"
#include "models/decoder.h"

namespace lathe {
namespace {

using graph::Value;

Tensor filled(const Shape& shape, float v) {
  Tensor t = Tensor::zeros(DType::F32, shape);
  float* p = t.mut<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  return t;
}

class DeepseekV4Model : public Decoder {
 public:
  DeepseekV4Model(Dsv4Config c, Dsv4Weights w) : c_(std::move(c)), w_(std::move(w)) {
    ropes_.emplace_back(c_.main_rope);
    ropes_.emplace_back(c_.compress_rope);
    embed_ = w_.embed;
    lm_head_ = w_.lm_head;
    const int64_t h = c_.hidden_size, hc = c_.hc_mult;
    streams_ = Tensor::zeros(DType::F32, {hc, 1});
    ones_streams_ = filled({hc * h}, 1.0f);
    ones_head_ = filled({c_.head_dim}, 1.0f);
    for (const Dsv4Layer& l : w_.layers) {
      if (l.tid2eid.empty()) {
        tid2eid_.emplace_back();
        continue;
      }
      Tensor t = Tensor::zeros(DType::F32, {c_.vocab_size, c_.top_k});
      for (size_t i = 0; i < l.tid2eid.size(); ++i)
        t.mut<float>()[i] = static_cast<float>(l.tid2eid[i]);
      tid2eid_.push_back(std::move(t));
    }
    info_.architecture = c_.architecture;
    info_.vocab_size = c_.vocab_size;
    info_.hidden_size = h;
    info_.num_layers = c_.num_layers;
    info_.kv_heads = 1;
    info_.head_dim = c_.head_dim;
    info_.max_position_embeddings = c_.max_position_embeddings;
    info_.weight_dtype = w_.matrix_dtype;
  }

  // A sliding ring of keys (= values) per layer; CSA and HCA layers add their compressors
  // (CSA: the attention's, then the indexer's).
  std::vector<LayerStateSpec> layer_states() const override {
    std::vector<LayerStateSpec> out;
    for (Dsv4Attention kind : c_.layer_attention) {
      LayerStateSpec s{.kind = StateKind::SlidingKV,
                       .kv_heads = 1,
                       .head_dim = c_.head_dim,
                       .window = c_.sliding_window,
                       .v_head_dim = 0};
      if (kind == Dsv4Attention::Hca) s.compressors = {{c_.hca_rate, c_.head_dim, c_.head_dim}};
      if (kind == Dsv4Attention::Csa)
        s.compressors = {{c_.csa_rate, c_.head_dim, 2 * c_.head_dim},
                         {c_.csa_rate, c_.index_head_dim, 2 * c_.index_head_dim}};
      out.push_back(std::move(s));
    }
    return out;
  }

 protected:
  // The embedding copied into hc_mult streams: [n, hidden] + zeros [hc, 1] -> [n, hc, hidden].
  Value embed(graph::Builder& g, const StepInputs& in) const override {
    const Value x = Decoder::embed(g, in);
    const int64_t n = g.dim(x, 0), h = c_.hidden_size;
    const Value s = g.binary(graph::BinaryOp::Add, g.reshape(x, {n, 1, h}), g.weight(streams_));
    return g.reshape(s, {n, c_.hc_mult * h});
  }

  // DeepseekV4DecoderLayer: each block between two hyper-connections.
  Value layer(graph::Builder& g, int64_t i, Value x, const LayerInputs& in) const override {
    const Dsv4Layer& l = w_.layers[static_cast<size_t>(i)];
    const std::string p = cat("layer.", i, ".");
    x = hyper_block(g, x, l.hc_attn_fn, l.hc_attn_base, l.hc_attn_scale, [&](Value collapsed) {
      const Value a = g.name(norm(g, collapsed, l.attn_norm), p + "attn_norm");
      return attention(g, i, a, in, p);
    });
    return hyper_block(g, x, l.hc_ffn_fn, l.hc_ffn_base, l.hc_ffn_scale, [&](Value collapsed) {
      const Value m = g.name(norm(g, collapsed, l.ffn_norm), p + "mlp_norm");
      return g.name(moe(g, i, m, in.step.tokens), p + "mlp_out");
    });
  }

  // DeepseekV4HyperHead (the streams summed by their pre weights), then the final norm.
  Value final_norm(graph::Builder& g, Value x) const override {
    const int64_t r = g.dim(x, 0), hc = c_.hc_mult, h = c_.hidden_size;
    const Value mixes = blocks::linear(g, unweighted(g, x), w_.hc_head_fn);
    const Value pre =
        g.hyper_mix(mixes, g.weight(w_.hc_head_base), g.weight(w_.hc_head_scale), hc, 0, c_.hc_eps);
    const Value collapsed = g.batch_matmul(g.reshape(pre, {r, 1, hc}), g.reshape(x, {r, hc, h}));
    return norm(g, g.reshape(collapsed, {r, h}), w_.final_norm);
  }

 private:
  Value norm(graph::Builder& g, Value x, const Tensor& weight) const {
    return blocks::rms_norm(g, x, weight, c_.rms_norm_eps);
  }
  // DeepseekV4UnweightedRMSNorm over the last dimension (the streams flattened).
  Value unweighted(graph::Builder& g, Value x) const {
    return g.rms_norm(x, g.weight(ones_streams_), c_.rms_norm_eps);
  }

  // DeepseekV4HyperConnection around `block`: mixes from the normed streams give pre, post
  // and comb; the block runs on the streams summed by pre, and the new streams are
  // post_i * block + sum_j comb[j, i] stream_j.
  template <class Block>
  Value hyper_block(graph::Builder& g, Value x, const Tensor& fn, const Tensor& base,
                    const Tensor& scale, const Block& block) const {
    const int64_t n = g.dim(x, 0), hc = c_.hc_mult, h = c_.hidden_size;
    const Value mixes = blocks::linear(g, unweighted(g, x), fn);
    const Value w =
        g.hyper_mix(mixes, g.weight(base), g.weight(scale), hc, c_.hc_sinkhorn_iters, c_.hc_eps);
    const Value streams = g.reshape(x, {n, hc, h});
    const Value pre = g.reshape(g.slice(w, 0, hc), {n, 1, hc});
    const Value post = g.reshape(g.slice(w, hc, hc), {n, hc, 1});
    const Value comb_t = g.reshape(g.slice(w, 2 * hc, hc * hc), {n, hc, hc});
    const Value collapsed = g.reshape(g.batch_matmul(pre, streams), {n, h});
    const Value out = block(collapsed);
    const Value expanded = g.mul(post, g.reshape(out, {n, 1, h}));
    return g.reshape(g.add(expanded, g.batch_matmul(comb_t, streams)), {n, hc * h});
  }

  // DeepseekV4Attention (and its compressor and indexer) of x [n, hidden].
  Value attention(graph::Builder& g, int64_t i, Value x, const LayerInputs& in,
                  const std::string& p) const {
    const Dsv4Layer& l = w_.layers[static_cast<size_t>(i)];
    const Dsv4Attention kind = c_.layer_attention[static_cast<size_t>(i)];
    const int64_t n = g.dim(x, 0), heads = c_.heads, hd = c_.head_dim;
    const bool compressed = kind != Dsv4Attention::Sliding;
    const Value tables = in.rope_tables[compressed ? 1 : 0];
    auto rotate = [&](Value v, bool inverse = false) {
      return g.rope(v, tables, graph::RopeLayout::Interleaved, true, inverse);
    };
    const Value q_resid = norm(g, blocks::linear(g, x, l.wq_a), l.q_norm);
    Value q = g.reshape(blocks::linear(g, q_resid, l.wq_b), {n, heads, hd});
    q = g.name(rotate(g.rms_norm(q, g.weight(ones_head_), c_.rms_norm_eps)), p + "q");
    Value kv = norm(g, blocks::linear(g, x, l.wkv), l.kv_norm);
    kv = g.name(rotate(g.reshape(kv, {n, 1, hd})), p + "k");
    Value chosen;
    if (compressed) {
      compress(g, x, l.compressor, i, 0);
      if (kind == Dsv4Attention::Csa) chosen = indexer(g, i, x, q_resid, in);
    }
    graph::Builder::AttentionParams ap{.layer = i,
                                       .window = c_.sliding_window,
                                       .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
                                       .value_dim = hd};
    if (compressed) ap.compressor = 0;
    Value o = g.attention(q, kv, {}, ap, {}, g.weight(l.sinks), chosen);
    // K = V carried the keys' rotation into the values: undone at the query's position.
    o = g.name(rotate(o, true), p + "attn");
    // The grouped output projection: each group of heads by its block of wo_a, then wo_b.
    const int64_t groups = c_.o_groups, rank = c_.o_lora_rank, per = heads * hd / groups;
    const Value grouped = g.head_linear(g.reshape(o, {n, groups, per}),
                                        g.weight(l.wo_a.reshape({groups, rank, per})));
    return g.name(blocks::linear(g, g.reshape(grouped, {n, groups * rank}), l.wo_b),
                  p + "attn_out");
  }

  // A compressor's projections into compressor `index` of cache layer `layer`.
  void compress(graph::Builder& g, Value x, const Dsv4Compressor& c, int64_t layer,
                int64_t index) const {
    const Value kv = blocks::linear(g, x, c.wkv);
    const Value gate = blocks::linear(g, x, c.wgate);
    g.compress(kv, gate, g.weight(c.ape), g.weight(c.norm), ropes_[1],
               {.layer = layer, .compressor = index, .eps = c_.rms_norm_eps});
  }

  // DeepseekV4Indexer: its own compressor (index 1), then each query's top index_topk entries.
  Value indexer(graph::Builder& g, int64_t i, Value x, Value q_resid, const LayerInputs& in) const {
    const Dsv4Layer& l = w_.layers[static_cast<size_t>(i)];
    const int64_t n = g.dim(x, 0), heads = c_.index_heads, dim = c_.index_head_dim;
    compress(g, x, l.index_compressor, i, 1);
    Value q = g.reshape(blocks::linear(g, q_resid, l.index_wq_b), {n, heads, dim});
    q = g.rope(q, in.rope_tables[1], graph::RopeLayout::Interleaved, true);
    const Value w = g.scale(blocks::linear(g, x, l.index_weights_proj),
                            1.0f / std::sqrt(static_cast<float>(heads)));
    return g.indexer(q, {}, w, i, c_.index_topk, 1.0f / std::sqrt(static_cast<float>(dim)), 1);
  }

  // DeepseekV4SparseMoeBlock: the routed experts (sqrt(softplus) scores; hash layers take
  // their experts from tid2eid by token id) plus the shared expert.
  Value moe(graph::Builder& g, int64_t i, Value x, Value tokens) const {
    const Dsv4Layer& l = w_.layers[static_cast<size_t>(i)];
    const Value logits = blocks::linear(g, x, l.router, {}, graph::Quantize::Never);
    const Tensor& table = tid2eid_[static_cast<size_t>(i)];
    const Value ids = table.defined() ? g.embedding(g.weight(table), tokens) : Value{};
    const Value route =
        g.name(g.route(logits,
                       {.routing = graph::Routing::SqrtSoftplus,
                        .top_k = c_.top_k,
                        .norm_topk = true,
                        .norm_eps = 1e-20f,
                        .scale = c_.routed_scaling_factor},
                       table.defined() ? Value{} : g.weight(l.correction_bias), {}, ids),
               cat("layer.", i, ".route"));
    std::vector<graph::Builder::Expert> experts;
    for (const GatedMlpWeights& e : l.experts)
      experts.push_back({g.weight(e.gate), g.weight(e.up), g.weight(e.down)});
    const Value routed =
        g.experts(x, route, experts, graph::Activation::Silu,
                  {.kind = graph::ExpertGlu::ClampedSilu, .limit = c_.swiglu_limit});
    // DeepseekV4MLP: silu(min(gate, limit)) * clamp(up, -limit, limit), then down.
    const float limit = c_.swiglu_limit;
    const Value gate = g.clamp(blocks::linear(g, x, l.shared.gate), limit, true);
    const Value up = g.clamp(blocks::linear(g, x, l.shared.up), limit);
    const Value shared =
        blocks::linear(g, g.act_mul(graph::Activation::Silu, gate, up), l.shared.down);
    return g.add(routed, shared);
  }

  Dsv4Config c_;
  Dsv4Weights w_;
  Tensor streams_, ones_streams_, ones_head_;
  std::vector<Tensor> tid2eid_;  // per layer: [vocab, top_k] expert ids as F32, or undefined
};

}  // namespace

std::unique_ptr<Model> load_deepseek_v4(const Checkpoint& ckpt, const ModelOptions& opts) {
  Dsv4Config c = read_deepseek_v4_config(ckpt);
  Dsv4Weights w = load_deepseek_v4_weights(ckpt, c, opts.dtype, !opts.dequantize_fp8);
  return std::make_unique<DeepseekV4Model>(std::move(c), std::move(w));
}

}  // namespace lathe
