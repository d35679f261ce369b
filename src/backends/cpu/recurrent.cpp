#include "backends/cpu/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/isa.h"

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

}  // namespace lathe::cpu

// The baseline level's recurrent kernels, which the reference backend also runs.
namespace lathe::cpu::portable {
#include "backends/cpu/recurrent_kernels.inc"
}  // namespace lathe::cpu::portable

namespace lathe::cpu {

namespace {

// Runs fn(h0, h1, thread) over `heads` heads on the pool, one block of heads per thread.
template <class F>
void over_heads(int64_t heads, ThreadPool* pool, const F& fn) {
  if (!pool || heads < 2) return fn(0, heads, 0);
  const int64_t blocks = std::min<int64_t>(pool->size(), heads);
  pool->parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(heads * b / blocks, heads * (b + 1) / blocks, b);
  });
}

}  // namespace

int64_t delta_rule_scratch_floats(int64_t k_dim, int64_t v_dim) {
  return 2 * k_dim + v_dim;
}

void gated_delta_rule(const DeltaRuleArgs& a, ThreadPool* pool) {
  const int64_t stride = delta_rule_scratch_floats(a.k_dim, a.v_dim);
  over_heads(a.v_heads, pool, [&](int64_t h0, int64_t h1, int64_t thread) {
    portable::delta_rule_heads(a, h0, h1, a.scratch + thread * stride);
  });
}

void gated_delta_rule_fast(const DeltaRuleArgs& a, ThreadPool& pool) {
  const Isa isa = active_isa();
  const int64_t stride = delta_rule_scratch_floats(a.k_dim, a.v_dim);
  over_heads(a.v_heads, &pool, [&](int64_t h0, int64_t h1, int64_t thread) {
    float* scratch = a.scratch + thread * stride;
    switch (isa) {
      case Isa::Avx512Bf16:
      case Isa::Avx512:
        return avx512::delta_rule_heads(a, h0, h1, scratch);
      case Isa::Avx2:
        return avx2::delta_rule_heads(a, h0, h1, scratch);
      case Isa::Portable:
        return portable::delta_rule_heads(a, h0, h1, scratch);
    }
  });
}

void ssd(const SsdArgs& a, ThreadPool* pool) {
  over_heads(a.heads, pool,
             [&](int64_t h0, int64_t h1, int64_t) { portable::ssd_heads(a, h0, h1); });
}

void ssd_fast(const SsdArgs& a, ThreadPool& pool) {
  const Isa isa = active_isa();
  over_heads(a.heads, &pool, [&](int64_t h0, int64_t h1, int64_t) {
    switch (isa) {
      case Isa::Avx512Bf16:
      case Isa::Avx512:
        return avx512::ssd_heads(a, h0, h1);
      case Isa::Avx2:
        return avx2::ssd_heads(a, h0, h1);
      case Isa::Portable:
        return portable::ssd_heads(a, h0, h1);
    }
  });
}

}  // namespace lathe::cpu
