#include "models/blocks.h"

#include <cmath>

#include "core/error.h"

namespace lathe::blocks {

Value linear(Builder& g, Value x, const Tensor& w, const Tensor& bias, graph::Quantize quantize) {
  return g.linear(x, g.weight(w), g.weight(bias), quantize);
}

Value rms_norm(Builder& g, Value x, const Tensor& weight, float eps, float offset) {
  return g.rms_norm(x, g.weight(weight), eps, offset);
}

Value layer_norm(Builder& g, Value x, const NormWeights& w, float eps) {
  return g.layer_norm(x, g.weight(w.weight), g.weight(w.bias), eps);
}

Value norm(Builder& g, Value x, const Norm& n) {
  switch (n.kind) {
    case Norm::Kind::Rms:
      return rms_norm(g, x, n.weight, n.eps, n.offset);
    case Norm::Kind::Layer:
      return layer_norm(g, x, {n.weight, n.bias}, n.eps);
  }
  fail("internal: norm kind ", static_cast<int>(n.kind));
}

Value self_attention(Builder& g, Value x, const AttentionWeights& w, const AttentionSpec& s,
                     const AttentionInputs& in, const std::string& prefix) {
  const int64_t n = g.dim(x, 0);
  Value q = linear(g, x, w.q, w.q_bias);
  Value gate;
  if (s.output_gate) {  // per head [query | gate] (Qwen3NextAttention's torch.chunk)
    if (s.qk_norm == QkNorm::RmsAcrossHeads || s.clip_qkv > 0)
      fail("internal: an output gate with flat q/k norms or clipping");
    const Value qg = g.reshape(q, {n, s.heads, 2 * s.head_dim});
    q = g.reshape(g.slice(qg, 0, s.head_dim), {n, s.heads * s.head_dim});
    gate = g.reshape(g.slice(qg, s.head_dim, s.head_dim), {n, s.heads * s.head_dim});
  }
  Value k = linear(g, x, w.k, w.k_bias);
  if (s.key_scale != 1) k = g.scale(k, s.key_scale);
  Value v = linear(g, x, w.v, w.v_bias);
  auto clip = [&] {
    q = g.clamp(q, s.clip_qkv);
    k = g.clamp(k, s.clip_qkv);
    v = g.clamp(v, s.clip_qkv);
  };
  // OlmoAttention clamps the projections before anything else.
  if (s.clip_qkv > 0 && !s.clip_after_norm) clip();
  auto norm = [&](Value t, const Tensor& weight, const Tensor& bias) {
    return s.qk_norm == QkNorm::LayerPerHead ? layer_norm(g, t, {weight, bias}, s.norm_eps)
                                             : rms_norm(g, t, weight, s.norm_eps, s.norm_offset);
  };
  // Olmo2Attention normalises the flat projections; Qwen3/Gemma3 each head after reshaping.
  if (s.qk_norm == QkNorm::RmsAcrossHeads) {
    q = norm(q, w.q_norm, w.q_norm_bias);
    k = norm(k, w.k_norm, w.k_norm_bias);
  }
  if (s.clip_qkv > 0 && s.clip_after_norm) {  // OlmoeAttention: after its flat q/k norms
    if (s.qk_norm != QkNorm::RmsAcrossHeads && s.qk_norm != QkNorm::None)
      fail("internal: clip_after_norm with per-head q/k norms");
    clip();
  }
  q = g.reshape(q, {n, s.heads, s.head_dim});
  k = g.reshape(k, {n, s.kv_heads, s.head_dim});
  v = g.reshape(v, {n, s.kv_heads, s.head_dim});
  if (s.qk_norm == QkNorm::RmsPerHead || s.qk_norm == QkNorm::LayerPerHead) {
    q = norm(q, w.q_norm, w.q_norm_bias);
    k = norm(k, w.k_norm, w.k_norm_bias);
  }
  if (s.rope) {
    q = g.rope(q, in.q_rope_tables.valid() ? in.q_rope_tables : in.rope_tables, s.rope_layout);
    k = g.rope(k, in.rope_tables, s.rope_layout);
  }
  g.name(q, prefix + "q");
  g.name(k, prefix + "k");
  g.name(v, prefix + "v");
  const float scale = s.scale != 0 ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  Value out = g.attention(q, k, v,
                          {.layer = in.layer,
                           .window = s.window,
                           .scale = scale,
                           .softcap = s.softcap,
                           .bias = in.bias},
                          g.weight(in.slopes), g.weight(in.sinks));
  g.name(out, prefix + "attn");
  out = g.reshape(out, {n, s.heads * s.head_dim});
  if (s.output_gate) out = g.act_mul(graph::Activation::Sigmoid, gate, out);
  out = linear(g, out, w.o, w.o_bias);
  return g.name(out, prefix + "attn_out");
}

Value feed_forward(Builder& g, Value x, const GatedMlpWeights& w, graph::Activation act) {
  Value up = linear(g, x, w.up, w.up_bias);
  Value h = w.gate.defined() && w.gate.numel() > 0
                ? g.act_mul(act, linear(g, x, w.gate, w.gate_bias), up)
                : g.activation(act, up);
  return linear(g, h, w.down, w.down_bias);
}

Value gated_mlp(Builder& g, Value x, const GatedMlpWeights& w, graph::Activation act,
                const std::string& prefix) {
  return g.name(feed_forward(g, x, w, act), prefix + "mlp_out");
}

std::vector<LayerStateSpec> kv_layer_states(const AttentionSpec& s,
                                            const std::vector<int64_t>& layer_windows) {
  std::vector<LayerStateSpec> out;
  for (int64_t window : layer_windows)
    out.push_back({.kind = window > 0 ? StateKind::SlidingKV : StateKind::FullKV,
                   .kv_heads = s.kv_heads,
                   .head_dim = s.head_dim,
                   .window = window});
  return out;
}

}  // namespace lathe::blocks
