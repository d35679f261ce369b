#include <algorithm>
#include <cmath>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"

namespace lathe::cpu {

// transformers LlamaRMSNorm: hidden * rsqrt(mean(hidden^2) + eps), then * weight.
void rms_norm(const float* x, const float* weight, float offset, float eps, float* y, int64_t rows,
              int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float ss = 0.0f;
    for (int64_t i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = (weight[i] + offset) * (xr[i] * inv);
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

namespace {

// torch gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
float gelu_tanh_one(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_one(gate[i]) * up[i];
}

void gelu_tanh(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_one(x[i]);
}

// torch gelu(approximate="none"): 0.5 x (1 + erf(x / sqrt(2))).
void gelu_erf(const float* x, float* out, int64_t n) {
  constexpr float kInvSqrt2 = 0.7071067811865476f;
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

// torch.nn.LayerNorm: mean and biased variance per row, accumulated in f32.
void layer_norm(const float* x, const float* weight, const float* bias, int64_t groups, float eps,
                float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const int64_t g = (r % groups) * n;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(n);
    float var = 0.0f;
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      float v = (xr[i] - mean) * inv;
      if (weight) v *= weight[g + i];
      yr[i] = bias ? v + bias[g + i] : v;
    }
  }
}

// transformers XIELUActivation._xielu_python, elementwise in f32.
void xielu(const float* x, float* out, int64_t n, float alpha_p, float alpha_n, float beta,
           float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = v > 0 ? alpha_p * v * v + beta * v
                   : (std::expm1(std::min(v, eps)) - v) * alpha_n + beta * v;
  }
}

// transformers apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, where rotate_half
// pairs element i with element i + rot/2.
void rope_half_split(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads,
                     int64_t head_dim, int64_t rot) {
  const int64_t half = rot / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

// transformers' GLM rotate_half pairs neighbours: (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]),
// with cos/sin of frequency i repeated for both (repeat_interleave(2)).
void rope_interleaved(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads,
                      int64_t head_dim, int64_t rot) {
  const int64_t half = rot / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c[i] - b * s[i];
        v[2 * i + 1] = b * c[i] + a * s[i];
      }
    }
  }
}

void activation(graph::Activation act, const float* x, float* y, int64_t n) {
  switch (act) {
    case graph::Activation::Silu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
      return;
    case graph::Activation::GeluTanh:
      cpu::gelu_tanh(x, y, n);
      return;
    case graph::Activation::Gelu:
      cpu::gelu_erf(x, y, n);
      return;
    case graph::Activation::Relu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
      return;
    case graph::Activation::Relu2:  // transformers ReLUSquaredActivation
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] * x[i] : 0.0f;
      return;
    case graph::Activation::Sigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
  }
}

void act_mul(graph::Activation act, const float* gate, const float* up, float* y, int64_t n) {
  switch (act) {
    case graph::Activation::Silu:
      cpu::silu_mul(gate, up, y, n);
      return;
    case graph::Activation::GeluTanh:
      cpu::gelu_tanh_mul(gate, up, y, n);
      return;
    case graph::Activation::Gelu:
    case graph::Activation::Relu:
    case graph::Activation::Relu2:
    case graph::Activation::Sigmoid:
      activation(act, gate, y, n);
      for (int64_t i = 0; i < n; ++i) y[i] *= up[i];
      return;
  }
}

void rms_norm_fast(const float* x, const float* weight, float offset, float eps, float* y,
                   int64_t rows, int64_t n) {
  switch (active_isa()) {
    case Isa::Avx512Bf16:
    case Isa::Avx512:
      return avx512::rms_norm(x, weight, offset, eps, y, rows, n);
    case Isa::Avx2:
      return avx2::rms_norm(x, weight, offset, eps, y, rows, n);
    case Isa::Portable:
      return rms_norm(x, weight, offset, eps, y, rows, n);
  }
}

void act_mul_fast(graph::Activation act, const float* gate, const float* up, float* y, int64_t n) {
  const Isa isa = active_isa();
  const bool avx512 = isa == Isa::Avx512 || isa == Isa::Avx512Bf16;
  if (act == graph::Activation::Silu && isa != Isa::Portable)
    return avx512 ? avx512::silu_mul(gate, up, y, n) : avx2::silu_mul(gate, up, y, n);
  if (act == graph::Activation::GeluTanh && isa != Isa::Portable)
    return avx512 ? avx512::gelu_tanh_mul(gate, up, y, n) : avx2::gelu_tanh_mul(gate, up, y, n);
  act_mul(act, gate, up, y, n);
}

}  // namespace lathe::cpu
