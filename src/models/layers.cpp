#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace lathe {

AttentionWeights load_attention(Weights& w, const std::string& prefix, const AttentionSpec& s,
                                const std::string& o_name) {
  AttentionWeights a;
  const int64_t q_out = s.heads * s.head_dim, kv_out = s.kv_heads * s.head_dim;
  a.q = w.matrix(prefix + "q_proj.weight", {s.output_gate ? 2 * q_out : q_out, s.hidden});
  a.k = w.matrix(prefix + "k_proj.weight", {kv_out, s.hidden});
  a.v = w.matrix(prefix + "v_proj.weight", {kv_out, s.hidden});
  a.o = w.matrix(prefix + o_name + ".weight", {s.hidden, q_out});
  if (s.qkv_bias) {
    a.q_bias = w.vector(prefix + "q_proj.bias", {s.output_gate ? 2 * q_out : q_out});
    a.k_bias = w.vector(prefix + "k_proj.bias", {kv_out});
    a.v_bias = w.vector(prefix + "v_proj.bias", {kv_out});
  }
  if (s.o_bias) a.o_bias = w.vector(prefix + o_name + ".bias", {s.hidden});
  switch (s.qk_norm) {
    case QkNorm::None:
    case QkNorm::LayerPerHead:  // the model file loads LayerNorm q/k norms
      break;
    case QkNorm::RmsPerHead:
      a.q_norm = w.vector(prefix + "q_norm.weight", {s.head_dim});
      a.k_norm = w.vector(prefix + "k_norm.weight", {s.head_dim});
      break;
    case QkNorm::RmsAcrossHeads:
      a.q_norm = w.vector(prefix + "q_norm.weight", {q_out});
      a.k_norm = w.vector(prefix + "k_norm.weight", {kv_out});
      break;
  }
  return a;
}

namespace {

// Rows [b, b + block) of m (rank 2, or rank 1 as a column) for each b in `starts`, in order.
Tensor gather_row_blocks(const Tensor& m, const std::vector<int64_t>& starts, int64_t block) {
  const int64_t cols = m.rank() == 2 ? m.dim(1) : 1;
  const size_t row = row_bytes(m.dtype(), cols);
  const int64_t rows = static_cast<int64_t>(starts.size()) * block;
  Tensor y = Tensor::zeros(m.dtype(), m.rank() == 2 ? Shape{rows, cols} : Shape{rows});
  auto* out = static_cast<uint8_t*>(y.mut<void>());
  for (size_t i = 0; i < starts.size(); ++i)
    std::memcpy(out + i * block * row, m.data<uint8_t>() + starts[i] * row, block * row);
  return y;
}

// The first row of every head of each kind in a grouped [q.. k.. v..] layout, group by group.
struct HeadStarts {
  std::vector<int64_t> q, k, v;
};
HeadStarts head_starts(const AttentionSpec& s, int64_t groups) {
  const int64_t q_per = s.heads / groups, kv_per = s.kv_heads / groups;
  const int64_t group_rows = (q_per + 2 * kv_per) * s.head_dim;
  HeadStarts h;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t base = g * group_rows;
    for (int64_t i = 0; i < q_per; ++i) h.q.push_back(base + i * s.head_dim);
    for (int64_t i = 0; i < kv_per; ++i) {
      h.k.push_back(base + (q_per + i) * s.head_dim);
      h.v.push_back(base + (q_per + kv_per + i) * s.head_dim);
    }
  }
  return h;
}

}  // namespace

FusedQkv split_fused_qkv(const Tensor& fused, const AttentionSpec& s, int64_t groups) {
  const int64_t rows = (s.heads + 2 * s.kv_heads) * s.head_dim;
  if ((fused.rank() != 1 && fused.rank() != 2) || fused.dim(0) != rows || groups <= 0 ||
      s.heads % groups != 0 || s.kv_heads % groups != 0)
    fail("internal: split_fused_qkv: ", shape_str(fused.shape()), " for ", s.heads, " heads, ",
         s.kv_heads, " kv heads of ", s.head_dim, " in ", groups, " groups");
  if (groups == 1) {  // [q | k | v]: three row blocks, views of the fused tensor
    const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
    return {fused.rows(0, q), fused.rows(q, kv), fused.rows(q + kv, kv)};
  }
  const auto [q, k, v] = head_starts(s, groups);
  return {gather_row_blocks(fused, q, s.head_dim), gather_row_blocks(fused, k, s.head_dim),
          gather_row_blocks(fused, v, s.head_dim)};
}

FusedQkv split_fused_qkv(Weights& w, const std::string& name, const Tensor& fused,
                         const AttentionSpec& s, int64_t groups) {
  FusedQkv out = split_fused_qkv(fused, s, groups);
  if (groups == 1) return out;  // views: found by address
  const auto starts = head_starts(s, groups);
  const std::vector<int64_t>* kinds[] = {&starts.q, &starts.k, &starts.v};
  Tensor* parts[] = {&out.q, &out.k, &out.v};
  for (int i = 0; i < 3; ++i) {
    std::vector<int64_t> rows;
    for (int64_t start : *kinds[i])
      for (int64_t r = 0; r < s.head_dim; ++r) rows.push_back(start + r);
    *parts[i] = w.gathered(name, fused, *parts[i], std::move(rows));
  }
  return out;
}

AttentionWeights load_fused_attention(Weights& w, const std::string& qkv, const std::string& o,
                                      const AttentionSpec& s, int64_t groups, bool bias) {
  const int64_t rows = (s.heads + 2 * s.kv_heads) * s.head_dim;
  AttentionWeights a;
  const FusedQkv m =
      split_fused_qkv(w, qkv + "weight", w.matrix(qkv + "weight", {rows, s.hidden}), s, groups);
  a.q = m.q, a.k = m.k, a.v = m.v;
  a.o = w.matrix(o + "weight", {s.hidden, s.heads * s.head_dim});
  if (bias) {
    const FusedQkv b = split_fused_qkv(w, qkv + "bias", w.vector(qkv + "bias", {rows}), s, groups);
    a.q_bias = b.q, a.k_bias = b.k, a.v_bias = b.v;
    a.o_bias = w.vector(o + "bias", {s.hidden});
  }
  return a;
}

Tensor transpose_matrix(const Tensor& m) {
  if (m.rank() != 2) fail("internal: transpose_matrix: ", shape_str(m.shape()));
  // A matrix of blocks (an FP8 checkpoint's) is dequantized first, exactly.
  if (dtype_traits(m.dtype()).block_size > 1) return transpose_matrix(m.to(DType::F32));
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
  return w.transposed(name, transpose_matrix(w.matrix(name, {in, out})));
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

Tensor alibi_slopes_tensor(int64_t heads) {
  const std::vector<float> slopes = alibi_slopes(heads);
  Tensor t = Tensor::zeros(DType::F32, {heads});
  std::copy(slopes.begin(), slopes.end(), t.mut<float>());
  return t;
}

NormWeights load_layer_norm(Weights& w, const std::string& prefix, int64_t dim, NormParams params) {
  const bool weight = params.weight, bias = params.bias;
  NormWeights n;
  if (weight) n.weight = w.vector(prefix + "weight", {dim});
  if (bias) n.bias = w.vector(prefix + "bias", {dim});
  return n;
}

Norm Norm::rms(float eps, float offset) {
  return {.kind = Kind::Rms, .eps = eps, .offset = offset};
}

Norm Norm::layer(float eps, NormParams params) {
  return {.kind = Kind::Layer, .eps = eps, .params = params};
}

Norm Norm::load(Weights& w, const std::string& prefix, int64_t dim) const {
  Norm n = *this;
  if (kind == Kind::Rms) {
    n.weight = w.vector(prefix + "weight", {dim});
  } else {
    const NormWeights nw = load_layer_norm(w, prefix, dim, params);
    n.weight = nw.weight;
    n.bias = nw.bias;
  }
  return n;
}

GatedMlpWeights load_gated_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                               int64_t intermediate, MlpParams params) {
  const bool bias = params.bias, gated = params.gated;
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

GatedMlpWeights load_fused_gate_up_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                                       int64_t intermediate) {
  GatedMlpWeights m;
  const Tensor gate_up = w.matrix(prefix + "gate_up_proj.weight", {2 * intermediate, hidden});
  m.gate = matrix_rows(gate_up, 0, intermediate);
  m.up = matrix_rows(gate_up, intermediate, intermediate);
  m.down = w.matrix(prefix + "down_proj.weight", {hidden, intermediate});
  return m;
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
  return m.rows(begin, count);
}

std::string base_model_prefix(const Checkpoint& ckpt, const std::string& prefix,
                              const std::string& probe) {
  return !ckpt.has(prefix + probe) && ckpt.has(probe) ? "" : prefix;
}

Tensor load_lm_head(Weights& w, bool tied, const Tensor& embed, int64_t vocab, int64_t hidden,
                    const std::string& name) {
  if (!tied) return w.matrix(name, {vocab, hidden});
  w.ignore(name);  // some tied checkpoints still store a copy; transformers ties it
  return embed.dtype() == w.matrix_dtype() ? embed : embed.to(w.matrix_dtype());
}

}  // namespace lathe
