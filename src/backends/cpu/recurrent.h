// Kernels of recurrent layers, which keep a fixed-size state per sequence instead of a KV
// cache: the depthwise causal convolution (graph Op::CausalConv), the gated delta rule of
// Gated DeltaNet linear attention (Op::GatedDeltaRule) and Mamba2's selective state space
// recurrence (Op::Ssd), as transformers' torch paths compute them. Each call runs one sequence's
// rows and carries its state forward, so a prompt run whole and the same prompt run token by token
// give the same numbers.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace lathe::cpu {

// out[t, c] = bias[c] + sum_j w[c, j] * x'[t + j, c] over the kernel, where x' is the last
// kernel - 1 inputs (`state` [kernel - 1, channels], zeros at a sequence's start) followed by
// x [n, channels]; `state` is then the last kernel - 1 rows of x'. bias may be null. As
// causal_conv1d_fn / causal_conv1d_update (F.conv1d with groups = channels) compute it.
void causal_conv(const float* x, int64_t n, int64_t channels, const float* w, int64_t kernel,
                 const float* bias, float* state, float* out);

struct DeltaRuleArgs {
  const float *q, *k;    // [n, k_heads, k_dim] (after the convolution)
  const float* v;        // [n, v_heads, v_dim]
  const float *a, *b;    // [n, v_heads]: the decay's and the write strength's projections
  const float* a_log;    // [v_heads]: the decay rate is -exp(A_log)
  const float* dt_bias;  // [v_heads]
  int64_t n, k_heads, v_heads, k_dim, v_dim;
  float* state;    // [v_heads, k_dim, v_dim]
  float* out;      // [n, v_heads, v_dim]
  float* scratch;  // delta_rule_scratch_floats() per thread of the pool (one without)
};
int64_t delta_rule_scratch_floats(int64_t k_dim, int64_t v_dim);
// Per token t and value head h (reading k head h / (v_heads / k_heads)), with q and k
// L2-normalised (eps 1e-6) and q divided by sqrt(k_dim), g = -exp(A_log) softplus(a + dt_bias)
// and beta = sigmoid(b):
//   S = exp(g) S;  S += k (beta (v - S^T k))^T;  out = S^T q
// torch_recurrent_gated_delta_rule's order of operations, exactly; on the pool over heads when
// given one (each head's arithmetic is the same either way).
void gated_delta_rule(const DeltaRuleArgs& a, ThreadPool* pool);

struct SsdArgs {
  const float* x;        // [n, heads, head_dim] (after the convolution)
  const float* dt;       // [n, heads]: the time step's projection
  const float* a_log;    // [heads]: A = -exp(A_log)
  const float* dt_bias;  // [heads]
  const float *b, *c;    // [n, groups, d_state]
  const float* d;        // [heads]: the skip
  float dt_min, dt_max;
  int64_t n, heads, head_dim, groups, d_state;
  float* state;  // [heads, head_dim, d_state]
  float* out;    // [n, heads, head_dim]
};
// Per token t and head h (reading B and C of group h / (heads / groups)), with
// dt = clamp(softplus(dt + dt_bias), dt_min, dt_max):
//   S[p, s] = exp(dt A) S[p, s] + (dt B[s]) x[p];  out[p] = sum_s S[p, s] C[s] + D x[p]
// mamba2_selective_state_update's order of operations (transformers' Mamba2 decode step);
// its prompt path, mamba2_chunk_scan, computes the same recurrence in chunks. On the pool
// over heads when given one (each head's arithmetic is the same either way).
void ssd(const SsdArgs& a, ThreadPool* pool);

}  // namespace lathe::cpu
