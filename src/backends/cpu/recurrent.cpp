#include "backends/cpu/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace lathe::cpu {

void causal_conv(const float* x, int64_t n, int64_t channels, const float* w, int64_t kernel,
                 const float* bias, float* state, float* out) {
  const int64_t past = kernel - 1;
  // Row r of x' = [state; x]: the state's rows first, then the step's.
  auto row = [&](int64_t r) { return r < past ? state + r * channels : x + (r - past) * channels; };
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * channels;
    for (int64_t c = 0; c < channels; ++c) o[c] = bias ? bias[c] : 0.0f;
    for (int64_t j = 0; j < kernel; ++j) {
      const float* in = row(t + j);
      for (int64_t c = 0; c < channels; ++c) o[c] += w[c * kernel + j] * in[c];
    }
  }
  // The new state: the last `past` rows of x' (which may still include old state rows).
  if (n >= past) {
    std::memcpy(state, x + (n - past) * channels, static_cast<size_t>(past * channels) * 4);
  } else {
    std::memmove(state, state + n * channels, static_cast<size_t>((past - n) * channels) * 4);
    std::memcpy(state + (past - n) * channels, x, static_cast<size_t>(n * channels) * 4);
  }
}

namespace {

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));  // torch's threshold 20, beta 1
}

// x * rsqrt(sum(x * x) + 1e-6) into out (the FLA-style l2norm transformers applies).
void l2norm(const float* x, int64_t d, float* out) {
  float sum = 0;
  for (int64_t i = 0; i < d; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum + 1e-6f);
  for (int64_t i = 0; i < d; ++i) out[i] = x[i] * inv;
}

// Value heads [h0, h1) over every token, with 2 k_dim + v_dim floats of scratch.
void delta_heads(const DeltaRuleArgs& a, int64_t h0, int64_t h1, float* scratch) {
  const int64_t group = a.v_heads / a.k_heads, dk = a.k_dim, dv = a.v_dim;
  const float q_scale = std::sqrt(static_cast<float>(dk));
  float* q = scratch;
  float* k = q + dk;
  float* delta = k + dk;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = h / group;
    float* S = a.state + h * dk * dv;
    const float rate = -std::exp(a.a_log[h]);
    for (int64_t t = 0; t < a.n; ++t) {
      l2norm(a.q + (t * a.k_heads + kh) * dk, dk, q);
      l2norm(a.k + (t * a.k_heads + kh) * dk, dk, k);
      for (int64_t i = 0; i < dk; ++i) q[i] /= q_scale;
      const float g = rate * softplus(a.a[t * a.v_heads + h] + a.dt_bias[h]);
      const float beta = 1.0f / (1.0f + std::exp(-a.b[t * a.v_heads + h]));
      const float decay = std::exp(g);
      const float* v = a.v + (t * a.v_heads + h) * dv;
      float* out = a.out + (t * a.v_heads + h) * dv;
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
      // delta = beta (v - S^T k)
      for (int64_t j = 0; j < dv; ++j) delta[j] = 0;
      for (int64_t i = 0; i < dk; ++i) {
        const float ki = k[i];
        const float* s = S + i * dv;
        for (int64_t j = 0; j < dv; ++j) delta[j] += s[j] * ki;
      }
      for (int64_t j = 0; j < dv; ++j) delta[j] = (v[j] - delta[j]) * beta;
      // S += k delta^T, then out = S^T q.
      for (int64_t j = 0; j < dv; ++j) out[j] = 0;
      for (int64_t i = 0; i < dk; ++i) {
        const float ki = k[i], qi = q[i];
        float* s = S + i * dv;
        for (int64_t j = 0; j < dv; ++j) {
          s[j] += ki * delta[j];
          out[j] += s[j] * qi;
        }
      }
    }
  }
}

// Heads [h0, h1) over every token.
void ssd_heads(const SsdArgs& a, int64_t h0, int64_t h1) {
  const int64_t per_group = a.heads / a.groups, dp = a.head_dim, ds = a.d_state;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t gr = h / per_group;
    float* S = a.state + h * dp * ds;
    const float A = -std::exp(a.a_log[h]);
    for (int64_t t = 0; t < a.n; ++t) {
      const float dt =
          std::clamp(softplus(a.dt[t * a.heads + h] + a.dt_bias[h]), a.dt_min, a.dt_max);
      const float dA = std::exp(dt * A);
      const float* B = a.b + (t * a.groups + gr) * ds;
      const float* C = a.c + (t * a.groups + gr) * ds;
      const float* x = a.x + (t * a.heads + h) * dp;
      float* out = a.out + (t * a.heads + h) * dp;
      for (int64_t p = 0; p < dp; ++p) {
        float* s = S + p * ds;
        float y = 0;
        for (int64_t j = 0; j < ds; ++j) {
          s[j] = s[j] * dA + dt * B[j] * x[p];
          y += s[j] * C[j];
        }
        out[p] = y + x[p] * a.d[h];
      }
    }
  }
}

}  // namespace

int64_t delta_rule_scratch_floats(int64_t k_dim, int64_t v_dim) {
  return 2 * k_dim + v_dim;
}

void gated_delta_rule(const DeltaRuleArgs& a, ThreadPool* pool) {
  if (!pool || a.v_heads < 2) return delta_heads(a, 0, a.v_heads, a.scratch);
  // One chunk of heads per thread, each with its own scratch.
  const int64_t chunks = std::min<int64_t>(pool->size(), a.v_heads);
  const int64_t stride = delta_rule_scratch_floats(a.k_dim, a.v_dim);
  pool->parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      delta_heads(a, a.v_heads * c / chunks, a.v_heads * (c + 1) / chunks, a.scratch + c * stride);
  });
}

void ssd(const SsdArgs& a, ThreadPool* pool) {
  if (!pool || a.heads < 2) return ssd_heads(a, 0, a.heads);
  pool->parallel_for(a.heads, 1, [&](int64_t h0, int64_t h1) { ssd_heads(a, h0, h1); });
}

}  // namespace lathe::cpu
