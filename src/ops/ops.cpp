#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "core/error.h"

namespace lathe::ops {
namespace {

void expect_f32(const Tensor& t, const char* op, const char* arg) {
  if (t.dtype() != DType::F32)
    fail("internal: ", op, ": ", arg, " must be F32, got ", dtype_name(t.dtype()));
}

void expect_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  if (a.shape() != b.shape())
    fail("internal: ", op, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
         " differ");
}

}  // namespace

Tensor linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias) {
  expect_f32(x, "linear", "input");
  if (w.rank() != 2 || x.dim(-1) != w.dim(1))
    fail("internal: linear: input ", shape_str(x.shape()), " does not match weight ",
         shape_str(w.shape()));
  if (w.dtype() != DType::F32 && w.dtype() != DType::BF16)
    fail("internal: linear: weight dtype ", dtype_name(w.dtype()), " has no kernel");
  if (bias && (bias->dtype() != DType::F32 || bias->numel() != w.dim(0)))
    fail("internal: linear: bias ", shape_str(bias->shape()), " does not match weight ",
         shape_str(w.shape()));
  const int64_t k = w.dim(1), n = w.dim(0), m = x.numel() / k;
  Shape out_shape = x.shape();
  out_shape.back() = n;
  Tensor y = Tensor::zeros(DType::F32, out_shape);
  const float* b = bias ? bias->data<float>() : nullptr;
  if (ctx.reference_kernels)
    cpu::matmul_reference(x.data<float>(), w.data<void>(), w.dtype(), b, y.mut<float>(), m, n, k);
  else
    cpu::matmul_fast(x.data<float>(), w.data<void>(), w.dtype(), b, y.mut<float>(), m, n, k,
                     *ctx.pool);
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps, float offset) {
  expect_f32(x, "rms_norm", "input");
  expect_f32(weight, "rms_norm", "weight");
  const int64_t n = x.dim(-1);
  if (weight.numel() != n)
    fail("internal: rms_norm: weight ", shape_str(weight.shape()), " for input ",
         shape_str(x.shape()));
  Tensor y = Tensor::zeros(DType::F32, x.shape());
  cpu::rms_norm(x.data<float>(), weight.data<float>(), offset, eps, y.mut<float>(), x.numel() / n,
                n);
  return y;
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  expect_same_shape(gate, up, "silu_mul");
  Tensor y = Tensor::zeros(DType::F32, gate.shape());
  cpu::silu_mul(gate.data<float>(), up.data<float>(), y.mut<float>(), gate.numel());
  return y;
}

Tensor act_mul(Activation act, const Tensor& gate, const Tensor& up) {
  expect_same_shape(gate, up, "act_mul");
  Tensor y = Tensor::zeros(DType::F32, gate.shape());
  switch (act) {
    case Activation::Silu:
      cpu::silu_mul(gate.data<float>(), up.data<float>(), y.mut<float>(), gate.numel());
      break;
    case Activation::GeluTanh:
      cpu::gelu_tanh_mul(gate.data<float>(), up.data<float>(), y.mut<float>(), gate.numel());
      break;
    case Activation::Gelu:
      cpu::gelu_erf(gate.data<float>(), y.mut<float>(), gate.numel());
      for (int64_t i = 0; i < y.numel(); ++i) y.mut<float>()[i] *= up.data<float>()[i];
      break;
    case Activation::Relu:
    case Activation::Relu2:
      y = activation(act, gate);
      for (int64_t i = 0; i < y.numel(); ++i) y.mut<float>()[i] *= up.data<float>()[i];
      break;
  }
  return y;
}

Tensor activation(Activation act, const Tensor& x) {
  expect_f32(x, "activation", "input");
  Tensor y = Tensor::zeros(DType::F32, x.shape());
  switch (act) {
    case Activation::Silu: {
      const float* px = x.data<float>();
      float* py = y.mut<float>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] / (1.0f + std::exp(-px[i]));
      break;
    }
    case Activation::GeluTanh:
      cpu::gelu_tanh(x.data<float>(), y.mut<float>(), x.numel());
      break;
    case Activation::Gelu:
      cpu::gelu_erf(x.data<float>(), y.mut<float>(), x.numel());
      break;
    case Activation::Relu: {
      const float* px = x.data<float>();
      float* py = y.mut<float>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] > 0 ? px[i] : 0.0f;
      break;
    }
    case Activation::Relu2: {  // transformers ReLUSquaredActivation
      const float* px = x.data<float>();
      float* py = y.mut<float>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] > 0 ? px[i] * px[i] : 0.0f;
      break;
    }
  }
  return y;
}

Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps) {
  expect_f32(x, "layer_norm", "input");
  const int64_t n = x.dim(-1), rows = x.numel() / n;
  // Weight and bias hold n values, or g * n that successive rows cycle through.
  auto groups = [&](const Tensor* t, const char* arg) -> int64_t {
    if (!t) return 1;
    expect_f32(*t, "layer_norm", arg);
    const int64_t g = t->numel() / n;
    if (g <= 0 || g * n != t->numel() || rows % g != 0)
      fail("internal: layer_norm: ", arg, " ", shape_str(t->shape()), " for input ",
           shape_str(x.shape()));
    return g;
  };
  const int64_t gw = groups(weight, "weight"), gb = groups(bias, "bias");
  if (weight && bias && gw != gb)
    fail("internal: layer_norm: weight ", shape_str(weight->shape()), " and bias ",
         shape_str(bias->shape()), " differ");
  Tensor y = Tensor::zeros(DType::F32, x.shape());
  cpu::layer_norm(x.data<float>(), weight ? weight->data<float>() : nullptr,
                  bias ? bias->data<float>() : nullptr, std::max(gw, gb), eps, y.mut<float>(), rows,
                  n);
  return y;
}

void clamp_inplace(Tensor& x, float limit) {
  expect_f32(x, "clamp_inplace", "input");
  float* p = x.mut<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = std::clamp(p[i], -limit, limit);
}

Tensor xielu(const Tensor& x, float alpha_p, float alpha_n, float beta, float eps) {
  expect_f32(x, "xielu", "input");
  Tensor y = Tensor::zeros(DType::F32, x.shape());
  cpu::xielu(x.data<float>(), y.mut<float>(), x.numel(), alpha_p, alpha_n, beta, eps);
  return y;
}

void scale_inplace(Tensor& x, float s) {
  expect_f32(x, "scale_inplace", "input");
  float* p = x.mut<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] *= s;
}

void softcap_inplace(Tensor& x, float cap) {
  expect_f32(x, "softcap_inplace", "input");
  if (!(cap > 0)) fail("internal: softcap_inplace: cap ", cap, " must be positive");
  cpu::softcap(x.mut<float>(), x.numel(), cap);
}

Tensor add(const Tensor& a, const Tensor& b) {
  expect_same_shape(a, b, "add");
  Tensor y = Tensor::zeros(DType::F32, a.shape());
  float* o = y.mut<float>();
  const float *pa = a.data<float>(), *pb = b.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) o[i] = pa[i] + pb[i];
  return y;
}

void add_inplace(Tensor& a, const Tensor& b) {
  expect_same_shape(a, b, "add_inplace");
  float* pa = a.mut<float>();
  const float* pb = b.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) pa[i] += pb[i];
}

Tensor embedding(const Tensor& table, std::span<const int32_t> ids) {
  if (table.rank() != 2) fail("internal: embedding: table must be 2-D");
  const int64_t vocab = table.dim(0), dim = table.dim(1);
  Tensor y = Tensor::zeros(DType::F32, {static_cast<int64_t>(ids.size()), dim});
  float* o = y.mut<float>();
  const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(table.dtype());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab)
      fail("token id ", ids[i], " is outside the vocabulary of ", vocab, " tokens");
    const auto* row = table.data<uint8_t>() + static_cast<size_t>(ids[i]) * row_bytes;
    convert_to_f32(table.dtype(), row, o + i * dim, static_cast<size_t>(dim));
  }
  return y;
}

void rope(Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout) {
  if (x.rank() != 3 || cos.rank() != 2 || cos.shape() != sin.shape() || cos.dim(0) != x.dim(0) ||
      2 * cos.dim(1) > x.dim(2))
    fail("internal: rope: x ", shape_str(x.shape()), " with cos ", shape_str(cos.shape()));
  switch (layout) {
    case RopeLayout::HalfSplit:
      cpu::rope_half_split(x.mut<float>(), cos.data<float>(), sin.data<float>(), x.dim(0), x.dim(1),
                           x.dim(2), 2 * cos.dim(1));
      return;
    case RopeLayout::Interleaved:
      cpu::rope_interleaved(x.mut<float>(), cos.data<float>(), sin.data<float>(), x.dim(0),
                            x.dim(1), x.dim(2), 2 * cos.dim(1));
      return;
  }
}

Tensor attention(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                 int64_t pos0, int64_t window, float scale, float softcap,
                 const Tensor* position_bias) {
  if (q.rank() != 3 || k_cache.rank() != 3 || k_cache.shape() != v_cache.shape() ||
      q.dim(2) != k_cache.dim(2) || q.dim(1) % k_cache.dim(1) != 0 ||
      pos0 + q.dim(0) > k_cache.dim(0))
    fail("internal: attention: q ", shape_str(q.shape()), " over cache ",
         shape_str(k_cache.shape()), " at position ", pos0);
  if (position_bias) {
    expect_f32(*position_bias, "attention", "position bias");
    if (position_bias->rank() != 2 || position_bias->dim(0) != q.dim(1) ||
        position_bias->dim(1) < pos0 + q.dim(0))
      fail("internal: attention: position bias ", shape_str(position_bias->shape()), " for q ",
           shape_str(q.shape()), " at position ", pos0);
  }
  Tensor out = Tensor::zeros(DType::F32, q.shape());
  cpu::AttentionArgs a{q.data<float>(),
                       k_cache.data<float>(),
                       v_cache.data<float>(),
                       out.mut<float>(),
                       q.dim(0),
                       pos0,
                       q.dim(1),
                       k_cache.dim(1),
                       q.dim(2),
                       window,
                       scale,
                       softcap,
                       position_bias ? position_bias->data<float>() : nullptr,
                       position_bias ? position_bias->dim(1) : 0};
  if (ctx.reference_kernels)
    cpu::attention_reference(a);
  else
    cpu::attention_fast(a, *ctx.pool);
  return out;
}

void write_rows(Tensor& dst, const Tensor& src, int64_t at) {
  const int64_t row = dst.numel() / dst.dim(0);
  if (src.numel() % row != 0 || at + src.numel() / row > dst.dim(0))
    fail("internal: write_rows: ", shape_str(src.shape()), " into ", shape_str(dst.shape()),
         " at row ", at);
  std::memcpy(dst.mut<float>() + at * row, src.data<float>(), src.nbytes());
}

}  // namespace lathe::ops
