// Kernels of recurrent layers, which keep a fixed-size state per sequence instead of a KV
// cache: the depthwise causal convolution (graph Op::CausalConv), the gated delta rule of
// Gated DeltaNet linear attention (Op::GatedDeltaRule) and Mamba2's selective state space
// recurrence (Op::Ssd), as transformers' torch paths compute them. Each call runs one sequence's
// rows and carries its state forward, so a prompt run whole and the same prompt run token by token
// give the same numbers.
#pragma once

#include <cstdint>

#include "backends/cpu/isa_kernels.h"  // DeltaRuleArgs, SsdArgs
#include "core/thread_pool.h"

namespace lathe::cpu {

// out[t, c] = bias[c] + sum_j w[c, j] * x'[t + j, c] over the kernel, where x' is the last
// kernel - 1 inputs (`state` [kernel - 1, channels], zeros at a sequence's start) followed by
// x [n, channels]; `state` is then the last kernel - 1 rows of x'. bias may be null. As
// causal_conv1d_fn / causal_conv1d_update (F.conv1d with groups = channels) compute it.
void causal_conv(const float* x, int64_t n, int64_t channels, const float* w, int64_t kernel,
                 const float* bias, float* state, float* out);

// The scratch floats each thread of the delta rule kernels needs.
int64_t delta_rule_scratch_floats(int64_t k_dim, int64_t v_dim);
// Per token t and value head h (reading k head h / (v_heads / k_heads)), with q and k
// L2-normalised (eps 1e-6) and q divided by sqrt(k_dim), g = -exp(A_log) softplus(a + dt_bias)
// and beta = sigmoid(b):
//   S = exp(g) S;  S += k (beta (v - S^T k))^T;  out = S^T q
// torch_recurrent_gated_delta_rule's order of operations, exactly; on the pool over heads when
// given one (each head's arithmetic is the same either way). The reference backend's kernel.
void gated_delta_rule(const DeltaRuleArgs& a, ThreadPool* pool);
// The fast backend's: the same arithmetic, the same bits, with the loops of cpu::active_isa()
// (vectorised for it) on the pool. transformers runs a prompt in chunks
// (torch_chunk_gated_delta_rule, a UT transform per 64 rows); lathe runs the recurrence for
// prompts too, as the chunked form measured 2.2-3.3x slower on this CPU (docs/performance.md).
void gated_delta_rule_fast(const DeltaRuleArgs& a, ThreadPool& pool);

// Per token t and head h (reading B and C of group h / (heads / groups)), with
// dt = clamp(softplus(dt + dt_bias), dt_min, dt_max):
//   S[p, s] = exp(dt A) S[p, s] + (dt B[s]) x[p];  out[p] = sum_s S[p, s] C[s] + D x[p]
// mamba2_selective_state_update's order of operations (transformers' Mamba2 decode step);
// its prompt path, mamba2_chunk_scan, computes the same recurrence in chunks. On the pool
// over heads when given one (each head's arithmetic is the same either way).
void ssd(const SsdArgs& a, ThreadPool* pool);
// The same arithmetic, the same bits, with the loops of cpu::active_isa() on the pool.
void ssd_fast(const SsdArgs& a, ThreadPool& pool);

}  // namespace lathe::cpu
