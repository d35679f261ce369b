#include "models/mla.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace lathe {
namespace {

// The rows [h * per_head + begin, + count) of every head h of m [heads * per_head, k], stacked:
// [heads * count, k] (a copy, once at load).
Tensor head_rows(const Tensor& m, int64_t heads, int64_t per_head, int64_t begin, int64_t count) {
  const int64_t k = m.dim(1);
  const size_t row = row_bytes(m.dtype(), k);
  Tensor out = Tensor::zeros(m.dtype(), {heads * count, k});
  for (int64_t h = 0; h < heads; ++h)
    std::memcpy(static_cast<uint8_t*>(out.mut<void>()) + static_cast<size_t>(h * count) * row,
                m.data<uint8_t>() + static_cast<size_t>(h * per_head + begin) * row,
                static_cast<size_t>(count) * row);
  return out;
}

// m [heads * rows, cols] as [heads, cols, rows]: each head's block transposed.
Tensor transpose_heads(const Tensor& m, int64_t heads) {
  const int64_t rows = m.dim(0) / heads, cols = m.dim(1);
  Tensor out = Tensor::zeros(m.dtype(), {heads, cols, rows});
  for (int64_t h = 0; h < heads; ++h) {
    const Tensor t = transpose_matrix(m.rows(h * rows, rows));
    std::memcpy(static_cast<uint8_t*>(out.mut<void>()) + static_cast<size_t>(h) * t.nbytes(),
                t.data<uint8_t>(), t.nbytes());
  }
  return out;
}

}  // namespace

MlaWeights load_mla(Weights& w, const std::string& prefix, const MlaSpec& s) {
  MlaWeights m;
  const int64_t qk = s.qk_nope + s.qk_rope, h = s.hidden;
  Tensor q;
  if (s.q_lora_rank > 0) {
    m.q_a = w.matrix(prefix + "q_a_proj.weight", {s.q_lora_rank, h});
    if (s.bias) m.q_a_bias = w.vector(prefix + "q_a_proj.bias", {s.q_lora_rank});
    m.q_a_norm = w.vector(prefix + "q_a_layernorm.weight", {s.q_lora_rank});
    q = w.matrix(prefix + "q_b_proj.weight", {s.heads * qk, s.q_lora_rank});
  } else {
    q = w.matrix(prefix + "q_proj.weight", {s.heads * qk, h});
  }
  // Copies gathering each head's rows: logged with their rows, so that a shard plan splits
  // the stored q projection by heads.
  const std::string q_name = prefix + (s.q_lora_rank > 0 ? "q_b_proj.weight" : "q_proj.weight");
  auto gathered = [&](int64_t begin, int64_t count) {
    std::vector<int64_t> rows;
    for (int64_t hd = 0; hd < s.heads; ++hd)
      for (int64_t r = 0; r < count; ++r) rows.push_back(hd * qk + begin + r);
    return w.gathered(q_name, q, head_rows(q, s.heads, qk, begin, count), std::move(rows));
  };
  m.q_nope = gathered(0, s.qk_nope);
  m.q_rope = gathered(s.qk_nope, s.qk_rope);

  const Tensor kv_a = w.matrix(prefix + "kv_a_proj_with_mqa.weight", {s.latent_dim(), h});
  m.kv_a = matrix_rows(kv_a, 0, s.kv_lora_rank);
  m.k_rope = matrix_rows(kv_a, s.kv_lora_rank, s.qk_rope);
  if (s.bias) {
    const Tensor b = w.vector(prefix + "kv_a_proj_with_mqa.bias", {s.latent_dim()});
    m.kv_a_bias = b.rows(0, s.kv_lora_rank);
    m.k_rope_bias = b.rows(s.kv_lora_rank, s.qk_rope);
  }
  m.kv_a_norm = w.vector(prefix + "kv_a_layernorm.weight", {s.kv_lora_rank});

  const int64_t per_head = s.qk_nope + s.v_head_dim;
  Tensor kv_b = w.matrix(prefix + "kv_b_proj.weight", {s.heads * per_head, s.kv_lora_rank});
  // Its heads are transposed and run by HeadLinear, which takes f32 or bf16: an FP8 matrix
  // is dequantized here (exactly in f32), as transformers dequantizes every one.
  if (dtype_traits(kv_b.dtype()).block_size > 1) kv_b = kv_b.to(w.matrix_dtype());
  m.uk_t = transpose_heads(head_rows(kv_b, s.heads, per_head, 0, s.qk_nope), s.heads);
  m.uv = head_rows(kv_b, s.heads, per_head, s.qk_nope, s.v_head_dim)
             .reshape({s.heads, s.v_head_dim, s.kv_lora_rank});
  m.o = w.matrix(prefix + "o_proj.weight", {h, s.heads * s.v_head_dim});
  if (s.bias) m.o_bias = w.vector(prefix + "o_proj.bias", {h});
  return m;
}

LayerStateSpec mla_layer_state(const MlaSpec& s) {
  return {.kind = StateKind::FullKV,
          .kv_heads = 1,
          .head_dim = s.latent_dim(),
          .window = 0,
          .recurrent = {},
          .v_head_dim = 0};
}

namespace blocks {

Value mla_query_input(Builder& g, Value x, const MlaWeights& w, const MlaSpec& s) {
  if (!w.q_a.defined()) return x;
  return rms_norm(g, linear(g, x, w.q_a, w.q_a_bias), w.q_a_norm, s.lora_norm_eps);
}

Value mla_attention(Builder& g, Value x, const MlaWeights& w, const MlaSpec& s, Value rope_tables,
                    int64_t layer, const std::string& prefix) {
  return mla_attention(g, x, mla_query_input(g, x, w, s), w, s, rope_tables, layer, prefix);
}

Value mla_attention(Builder& g, Value x, Value q_in, const MlaWeights& w, const MlaSpec& s,
                    Value rope_tables, int64_t layer, const std::string& prefix, Value chosen) {
  const int64_t n = g.dim(x, 0);
  Value q_nope = g.reshape(linear(g, q_in, w.q_nope), {n, s.heads, s.qk_nope});
  Value q_rope = g.reshape(linear(g, q_in, w.q_rope), {n, s.heads, s.qk_rope});
  q_rope = g.rope(q_rope, rope_tables, s.rope_layout);
  Value latent = rms_norm(g, linear(g, x, w.kv_a, w.kv_a_bias), w.kv_a_norm, s.lora_norm_eps);
  Value k_rope = g.reshape(linear(g, x, w.k_rope, w.k_rope_bias), {n, 1, s.qk_rope});
  k_rope = g.rope(k_rope, rope_tables, s.rope_layout);
  // Absorbed: each head's query in the latent space, beside its rotary part.
  Value q = g.name(g.concat(g.head_linear(q_nope, g.weight(w.uk_t)), q_rope), prefix + "q");
  Value k = g.name(g.concat(g.reshape(latent, {n, 1, s.kv_lora_rank}), k_rope), prefix + "k");
  Value out = g.attention(q, k, {}, {.layer = layer, .scale = s.scale, .value_dim = s.kv_lora_rank},
                          {}, {}, chosen);
  out = g.name(g.head_linear(out, g.weight(w.uv)), prefix + "attn");
  out = linear(g, g.reshape(out, {n, s.heads * s.v_head_dim}), w.o, w.o_bias);
  return g.name(out, prefix + "attn_out");
}

}  // namespace blocks
}  // namespace lathe
