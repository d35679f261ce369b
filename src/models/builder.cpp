#include "models/builder.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace lathe {
namespace {

const Tensor* opt(const Tensor& t) {
  return t.defined() && t.numel() > 0 ? &t : nullptr;
}

}  // namespace

AttentionWeights load_attention(Weights& w, const std::string& prefix, const AttentionSpec& s,
                                const std::string& o_name) {
  AttentionWeights a;
  const int64_t q_out = s.heads * s.head_dim, kv_out = s.kv_heads * s.head_dim;
  a.q = w.matrix(prefix + "q_proj.weight", {q_out, s.hidden});
  a.k = w.matrix(prefix + "k_proj.weight", {kv_out, s.hidden});
  a.v = w.matrix(prefix + "v_proj.weight", {kv_out, s.hidden});
  a.o = w.matrix(prefix + o_name + ".weight", {s.hidden, q_out});
  if (s.qkv_bias) {
    a.q_bias = w.vector(prefix + "q_proj.bias", {q_out});
    a.k_bias = w.vector(prefix + "k_proj.bias", {kv_out});
    a.v_bias = w.vector(prefix + "v_proj.bias", {kv_out});
  }
  if (s.o_bias) a.o_bias = w.vector(prefix + o_name + ".bias", {s.hidden});
  if (s.qk_layer_norm) return a;  // the model file loads LayerNorm q/k norms
  switch (s.qk_norm) {
    case QkNorm::None:
      break;
    case QkNorm::PerHead:
      a.q_norm = w.vector(prefix + "q_norm.weight", {s.head_dim});
      a.k_norm = w.vector(prefix + "k_norm.weight", {s.head_dim});
      break;
    case QkNorm::AcrossHeads:
      a.q_norm = w.vector(prefix + "q_norm.weight", {q_out});
      a.k_norm = w.vector(prefix + "k_norm.weight", {kv_out});
      break;
  }
  return a;
}

Tensor self_attention(Context& ctx, const Tensor& x, const AttentionWeights& w,
                      const AttentionSpec& s, const Tensor& cos, const Tensor& sin,
                      KVCache::Layer& cache, int64_t pos0, const Tensor* position_bias) {
  const int64_t n = x.dim(0);
  Tensor q = ops::linear(ctx, x, w.q, opt(w.q_bias));
  Tensor k = ops::linear(ctx, x, w.k, opt(w.k_bias));
  Tensor v = ops::linear(ctx, x, w.v, opt(w.v_bias));
  if (s.clip_qkv > 0) {  // OlmoAttention clamps the projections before anything else
    ops::clamp_inplace(q, s.clip_qkv);
    ops::clamp_inplace(k, s.clip_qkv);
    ops::clamp_inplace(v, s.clip_qkv);
  }
  auto norm = [&](const Tensor& t, const Tensor& weight, const Tensor& bias) {
    return s.qk_layer_norm ? ops::layer_norm(t, opt(weight), opt(bias), s.norm_eps)
                           : ops::rms_norm(t, weight, s.norm_eps, s.norm_offset);
  };
  // Olmo2Attention normalises the flat projections; Qwen3/Gemma3 each head after reshaping.
  if (s.qk_norm == QkNorm::AcrossHeads) {
    q = norm(q, w.q_norm, w.q_norm_bias);
    k = norm(k, w.k_norm, w.k_norm_bias);
  }
  q = q.reshape({n, s.heads, s.head_dim});
  k = k.reshape({n, s.kv_heads, s.head_dim});
  v = v.reshape({n, s.kv_heads, s.head_dim});
  if (s.qk_norm == QkNorm::PerHead) {
    q = norm(q, w.q_norm, w.q_norm_bias);
    k = norm(k, w.k_norm, w.k_norm_bias);
  }
  if (s.rope) {
    ops::rope(q, cos, sin, s.rope_layout);
    ops::rope(k, cos, sin, s.rope_layout);
  }
  ops::write_rows(cache.k, k, pos0);
  ops::write_rows(cache.v, v, pos0);
  const float scale = s.scale != 0 ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  Tensor out =
      ops::attention(ctx, q, cache.k, cache.v, pos0, s.window, scale, s.softcap, position_bias);
  return ops::linear(ctx, out.reshape({n, s.heads * s.head_dim}), w.o, opt(w.o_bias));
}

namespace {

// Rows [b, b + block) of m (rank 2, or rank 1 as a column) for each b in `starts`, in order.
Tensor gather_row_blocks(const Tensor& m, const std::vector<int64_t>& starts, int64_t block) {
  const int64_t cols = m.rank() == 2 ? m.dim(1) : 1;
  const size_t row = static_cast<size_t>(cols) * dtype_size(m.dtype());
  const int64_t rows = static_cast<int64_t>(starts.size()) * block;
  Tensor y = Tensor::zeros(m.dtype(), m.rank() == 2 ? Shape{rows, cols} : Shape{rows});
  auto* out = static_cast<uint8_t*>(y.mut<void>());
  for (size_t i = 0; i < starts.size(); ++i)
    std::memcpy(out + i * block * row, m.data<uint8_t>() + starts[i] * row, block * row);
  return y;
}

}  // namespace

FusedQkv split_fused_qkv(const Tensor& fused, const AttentionSpec& s, int64_t groups) {
  const int64_t rows = (s.heads + 2 * s.kv_heads) * s.head_dim;
  if ((fused.rank() != 1 && fused.rank() != 2) || fused.dim(0) != rows || groups <= 0 ||
      s.heads % groups != 0 || s.kv_heads % groups != 0)
    fail("internal: split_fused_qkv: ", shape_str(fused.shape()), " for ", s.heads, " heads, ",
         s.kv_heads, " kv heads of ", s.head_dim, " in ", groups, " groups");
  const int64_t q_per = s.heads / groups, kv_per = s.kv_heads / groups;
  const int64_t group_rows = (q_per + 2 * kv_per) * s.head_dim;
  // The first row of every head of each kind, group by group.
  std::vector<int64_t> q, k, v;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t base = g * group_rows;
    for (int64_t i = 0; i < q_per; ++i) q.push_back(base + i * s.head_dim);
    for (int64_t i = 0; i < kv_per; ++i) {
      k.push_back(base + (q_per + i) * s.head_dim);
      v.push_back(base + (q_per + kv_per + i) * s.head_dim);
    }
  }
  return {gather_row_blocks(fused, q, s.head_dim), gather_row_blocks(fused, k, s.head_dim),
          gather_row_blocks(fused, v, s.head_dim)};
}

Tensor transpose_matrix(const Tensor& m) {
  if (m.rank() != 2) fail("internal: transpose_matrix: ", shape_str(m.shape()));
  const int64_t r = m.dim(0), c = m.dim(1);
  const size_t e = dtype_size(m.dtype());
  Tensor y = Tensor::zeros(m.dtype(), {c, r});
  const uint8_t* in = m.data<uint8_t>();
  auto* out = static_cast<uint8_t*>(y.mut<void>());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) std::memcpy(out + (j * r + i) * e, in + (i * c + j) * e, e);
  return y;
}

Tensor load_conv1d(Weights& w, const std::string& name, int64_t in, int64_t out) {
  return transpose_matrix(w.matrix(name, {in, out}));
}

std::vector<float> alibi_slopes(int64_t heads) {
  if (heads <= 0) fail("internal: alibi_slopes: ", heads, " heads");
  int64_t n = 1;  // closest_power_of_2
  while (n * 2 <= heads) n *= 2;
  // base = 2^(-(2^-(log2(n) - 3))) = 2^(-8/n), rounded to f32 as the torch tensor holds it.
  const auto slopes_of = [](int64_t pow2, int64_t first, int64_t step, int64_t count) {
    const float base = static_cast<float>(std::exp2(-8.0 / static_cast<double>(pow2)));
    std::vector<float> out;
    for (int64_t i = 0; i < count; ++i)
      out.push_back(static_cast<float>(std::pow(static_cast<double>(base), first + i * step)));
    return out;
  };
  std::vector<float> slopes = slopes_of(n, 1, 1, n);
  if (n != heads) {
    const std::vector<float> extra = slopes_of(2 * n, 1, 2, std::min(n, heads - n));
    slopes.insert(slopes.end(), extra.begin(), extra.end());
  }
  return slopes;
}

Tensor alibi_bias(std::span<const float> slopes, int64_t length) {
  const int64_t heads = static_cast<int64_t>(slopes.size());
  Tensor bias = Tensor::zeros(DType::F32, {heads, length});
  float* p = bias.mut<float>();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < length; ++j) p[h * length + j] = slopes[h] * static_cast<float>(j);
  return bias;
}

Tensor learned_positions(const Tensor& table, int64_t pos0, int64_t n, int64_t offset) {
  const int64_t available = table.dim(0) - offset;
  if (pos0 + n > available)
    fail("position ", pos0 + n - 1, " is past the model's ", available,
         " learned positions (max_position_embeddings)");
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), static_cast<int32_t>(pos0 + offset));
  return ops::embedding(table, ids);
}

NormWeights load_layer_norm(Weights& w, const std::string& prefix, int64_t dim, bool weight,
                            bool bias) {
  NormWeights n;
  if (weight) n.weight = w.vector(prefix + "weight", {dim});
  if (bias) n.bias = w.vector(prefix + "bias", {dim});
  return n;
}

Tensor layer_norm(const Tensor& x, const NormWeights& w, float eps) {
  return ops::layer_norm(x, opt(w.weight), opt(w.bias), eps);
}

GatedMlpWeights load_gated_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                               int64_t intermediate, bool bias, bool gated) {
  GatedMlpWeights m;
  if (gated) m.gate = w.matrix(prefix + "gate_proj.weight", {intermediate, hidden});
  m.up = w.matrix(prefix + "up_proj.weight", {intermediate, hidden});
  m.down = w.matrix(prefix + "down_proj.weight", {hidden, intermediate});
  if (bias) {
    if (gated) m.gate_bias = w.vector(prefix + "gate_proj.bias", {intermediate});
    m.up_bias = w.vector(prefix + "up_proj.bias", {intermediate});
    m.down_bias = w.vector(prefix + "down_proj.bias", {hidden});
  }
  return m;
}

Tensor swiglu_mlp(Context& ctx, const Tensor& x, const GatedMlpWeights& w) {
  Tensor gate = ops::linear(ctx, x, w.gate, opt(w.gate_bias));
  Tensor up = ops::linear(ctx, x, w.up, opt(w.up_bias));
  return ops::linear(ctx, ops::silu_mul(gate, up), w.down, opt(w.down_bias));
}

Tensor gated_mlp(Context& ctx, const Tensor& x, const GatedMlpWeights& w, ops::Activation act) {
  Tensor up = ops::linear(ctx, x, w.up, opt(w.up_bias));
  if (!opt(w.gate))  // ungated (ArceeMLP): down(act(up(x)))
    return ops::linear(ctx, ops::activation(act, up), w.down, opt(w.down_bias));
  Tensor gate = ops::linear(ctx, x, w.gate, opt(w.gate_bias));
  return ops::linear(ctx, ops::act_mul(act, gate, up), w.down, opt(w.down_bias));
}

GatedMlpWeights load_linear_mlp(Weights& w, const std::string& prefix, const std::string& up,
                                const std::string& down, int64_t hidden, int64_t intermediate,
                                bool bias) {
  GatedMlpWeights m;
  m.up = w.matrix(prefix + up + ".weight", {intermediate, hidden});
  m.down = w.matrix(prefix + down + ".weight", {hidden, intermediate});
  if (bias) {
    m.up_bias = w.vector(prefix + up + ".bias", {intermediate});
    m.down_bias = w.vector(prefix + down + ".bias", {hidden});
  }
  return m;
}

void parallel_residual(Tensor& x, const Tensor& a, const Tensor& m) {
  ops::add_inplace(x, ops::add(a, m));  // a + m == m + a (FalconDecoderLayer's order) exactly
}

ops::Activation read_activation(const JsonFields& f, const std::string& field,
                                const std::string& fallback, const std::string& architecture) {
  const std::string act = f.get_or<std::string>(field, fallback);
  if (act == "silu" || act == "swish") return ops::Activation::Silu;
  if (act == "gelu") return ops::Activation::Gelu;
  // NewGELUActivation (gelu_new) is the same tanh approximation, written out.
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return ops::Activation::GeluTanh;
  if (act == "relu") return ops::Activation::Relu;
  if (act == "relu2") return ops::Activation::Relu2;
  fail(f.origin(), ": field \"", field, "\" is \"", act, "\"; ", architecture,
       " in lathe implements \"silu\", \"gelu\", \"gelu_pytorch_tanh\", \"gelu_new\", "
       "\"relu\" and \"relu2\"");
}

Tensor stack_rows(const std::vector<Tensor>& rows) {
  if (rows.empty()) fail("internal: stack_rows: no rows");
  const int64_t n = rows[0].numel();
  Tensor y = Tensor::zeros(DType::F32, {static_cast<int64_t>(rows.size()), n});
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].dtype() != DType::F32 || rows[r].numel() != n)
      fail("internal: stack_rows: row ", r, " ", shape_str(rows[r].shape()), " of ",
           dtype_name(rows[r].dtype()));
    std::memcpy(y.mut<float>() + static_cast<int64_t>(r) * n, rows[r].data<float>(),
                static_cast<size_t>(n) * sizeof(float));
  }
  return y;
}

Tensor matrix_rows(const Tensor& m, int64_t begin, int64_t count) {
  if (m.rank() != 2 || begin < 0 || count < 0 || begin + count > m.dim(0))
    fail("internal: matrix_rows: rows [", begin, ", ", begin + count, ") of ",
         shape_str(m.shape()));
  Tensor y = Tensor::zeros(m.dtype(), {count, m.dim(1)});
  const size_t row = static_cast<size_t>(m.dim(1)) * dtype_size(m.dtype());
  std::memcpy(y.mut<void>(), m.data<uint8_t>() + static_cast<size_t>(begin) * row,
              static_cast<size_t>(count) * row);
  return y;
}

float read_nullable_float(const JsonFields& f, const std::string& field, float fallback) {
  if (!f.json().contains(field)) return fallback;
  return static_cast<float>(f.get_or<double>(field, 0.0));
}

int64_t read_int_alias(const JsonFields& f, const std::string& field, const std::string& alias,
                       int64_t fallback) {
  return f.has(field) ? f.get<int64_t>(field) : f.get_or<int64_t>(alias, fallback);
}

void check_sizes(const JsonFields& f,
                 std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (auto [name, v] : sizes)
    if (v <= 0 || v > (int64_t{1} << 31))
      fail(f.origin(), ": field \"", name, "\" is ", v, ", out of range");
}

Json with_legacy_rope_fields(const JsonFields& f, const char* theta_field, double theta,
                             const char* partial_field, double partial) {
  Json c = f.json();
  Json p = f.has("rope_scaling")      ? f.at("rope_scaling")
           : f.has("rope_parameters") ? f.at("rope_parameters")
                                      : Json::object();
  if (!p.is_object()) fail(f.origin(), ": field \"rope_parameters\" must be an object");
  if (!p.contains("rope_theta")) p["rope_theta"] = f.get_or<double>(theta_field, theta);
  if (!p.contains("partial_rotary_factor"))
    p["partial_rotary_factor"] = f.get_or<double>(partial_field, partial);
  c.erase("rope_scaling");
  c["rope_parameters"] = p;
  return c;
}

void check_cache_room(const KVCache& cache, int64_t n) {
  if (n <= 0) fail("forward: no tokens");
  if (cache.length + n > cache.max_seq)
    fail("sequence of ", cache.length + n, " tokens exceeds the KV cache of ", cache.max_seq,
         " positions (raise --max-seq)");
}

Tensor last_row(const Tensor& x) {
  const int64_t dim = x.dim(-1);
  Tensor y = Tensor::zeros(DType::F32, {1, dim});
  std::memcpy(y.mut<float>(), x.data<float>() + (x.numel() - dim), dim * sizeof(float));
  return y;
}

std::string base_model_prefix(const Weights& w, const std::string& prefix,
                              const std::string& probe) {
  return !w.has(prefix + probe) && w.has(probe) ? "" : prefix;
}

Tensor load_lm_head(Weights& w, bool tied, const Tensor& embed, int64_t vocab, int64_t hidden) {
  if (!tied) return w.matrix("lm_head.weight", {vocab, hidden});
  w.ignore("lm_head.weight");  // some tied checkpoints still store a copy; transformers ties it
  return embed.dtype() == w.matrix_dtype() ? embed : embed.to(w.matrix_dtype());
}

void check_layer_count(const Checkpoint& ckpt, const JsonFields& f, int64_t num_layers) {
  const size_t tensors = ckpt.tensor_names().size();
  if (num_layers > 0 && static_cast<uint64_t>(num_layers) > tensors)
    fail(f.origin(), ": field \"num_hidden_layers\" is ", num_layers, ", but the checkpoint holds ",
         tensors, " tensors (each layer has weights of its own)");
}

}  // namespace lathe
