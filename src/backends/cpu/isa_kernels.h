// The kernels compiled once per instruction set (kernels_avx2.cpp, kernels_avx512.cpp), each
// translation unit with its own -m flags. This header declares them with plain types only:
// nothing here (and nothing those files include besides <immintrin.h>) may define an inline
// function or template that other files also use, or the linker could keep the AVX-512 copy
// for a machine without AVX-512. kernels.h picks among them by cpu::active_isa().
#pragma once

#include <cstdint>

namespace lathe::cpu {

// Causal attention for `tokens` queries at positions pos0.. over a cache of keys and values
// [max_seq, kv_heads, head_dim] holding positions [0, pos0 + tokens). With window > 0 a
// query at p sees keys at p - window < j <= p. q and out are [tokens, heads, head_dim].
// With softcap > 0 each scaled score s becomes softcap * tanh(s / softcap) before the
// softmax (Gemma2 attn_logit_softcapping). With a bias [heads, bias_stride], bias[h, j] is
// added to head h's scaled score for key position j (ALiBi), after any capping.
// With slots > 0 the caches are rings of `slots` rows and position j lives in row j % slots
// (sliding-window layers); the caller keeps every visible key in the ring. With sinks
// [heads], head h's softmax takes sinks[h] as one more logit with no value: the max and the
// denominator include it (GptOss's eager_attention_forward). `scratch` holds
// pool-size rows (one for the reference kernel) of `scratch_stride` floats (below), so the
// kernel allocates nothing. With chunk > 0 a query at p sees only the keys of its
// chunk, p - p % chunk <= j <= p (and within the window): Llama 4's chunked attention.
// The caches hold floats, or bf16 (uint16_t, the top half of an f32) when kv_bf16 is set,
// widened exactly to f32 as they are read; every other step is the same.
struct AttentionArgs {
  const float* q;
  const void* k_cache;
  const void* v_cache;
  float* out;
  int64_t tokens, pos0, heads, kv_heads, head_dim, window;
  float scale;
  float softcap = 0.0f;
  const float* bias = nullptr;
  int64_t bias_stride = 0;
  int64_t slots = 0;
  // Each thread's scratch: scratch_stride floats, scratch_heads rows of scratch_stride /
  // scratch_heads floats (the fast kernels share each pass over the keys between that many
  // heads of a token). A row holds a head's scores (at least pos0 + tokens + 16 floats, more
  // with entries), then, for the fast kernels, 2 * attention_value_floats(v_dim) floats.
  float* scratch = nullptr;
  int64_t scratch_stride = 0;
  // Values [max_seq, kv_heads, v_dim] in rows of v_row floats, kv heads v_head floats apart;
  // out is [tokens, heads, v_dim]. MLA's values are the keys' first v_dim dims: v_cache is
  // k_cache, with the keys' strides.
  int64_t v_dim = 0, v_row = 0, v_head = 0;
  const float* sinks = nullptr;
  int64_t chunk = 0;
  bool kv_bf16 = false;
  // DeepSeek sparse attention: query t attends to the key positions chosen[t * chosen_k ..],
  // ascending, the first -1 ending them (an Indexer's output), instead of every visible key.
  // Never with a window, chunk, cap, bias or sinks.
  const int32_t* chosen = nullptr;
  int64_t chosen_k = 0;
  // DeepseekV4: after the keys, compressed entries [.., head_dim] (f32, their values in the
  // first v_dim dims), entry w seen by the query at p when w < (p + 1) / entry_rate, in the
  // same softmax. `chosen` then lists entries, not keys (the keys stay as the window says).
  // Only the portable row kernel reads them (attention_fast takes it for such layers).
  const float* entries = nullptr;
  int64_t entry_rate = 0;
  int64_t scratch_heads = 1;
};

// The floats of one head's value sums in the fast attention kernels' scratch: v_dim rounded
// up to 16 (one AVX-512 vector).
constexpr int64_t attention_value_floats(int64_t v_dim) {
  return (v_dim + 15) / 16 * 16;
}

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

struct SsdArgs {
  const float* x;        // [n, heads, head_dim] (after the convolution)
  const float* dt;       // [n, heads]: the time step's projection
  const float* a_log;    // [heads]: A = -exp(A_log)
  const float* dt_bias;  // [heads]
  const float *b, *c;    // [n, groups, d_state]
  const float* d;        // [heads]: the skip
  float dt_min, dt_max;
  int64_t n, heads, head_dim, groups, d_state;
  float* state;  // [heads, d_state, head_dim]: transformers' ssm_state transposed
  float* out;    // [n, heads, head_dim]
};

// The recurrent kernels of one level (recurrent_kernels.inc; recurrent.h gives their math), for
// heads [h0, h1) over every row, token by token: the gated delta rule (with `scratch` of
// delta_rule_scratch_floats) and Mamba2's scan. Declared in `portable` too (recurrent.cpp).
#define LATHE_DECLARE_RECURRENT_KERNELS                                                  \
  void delta_rule_heads(const DeltaRuleArgs& a, int64_t h0, int64_t h1, float* scratch); \
  void ssd_heads(const SsdArgs& a, int64_t h0, int64_t h1);

// One level's kernels, declared alike in each level's namespace. Rows [n0, n1) of
// y[m, ldy] = x[m, k] . w[n, k]^T, without bias, row_block rows of x at a time over each
// block of weight rows (the bits do not depend on it):
//  - gemm_rows: f32 activations, f32 weights (and bf16 ones on AVX2, widened exactly), fused
//    multiply-adds in lanes of 8 or 16 summed at the end; AVX-512 takes bf16 weights in
//    gemm_rows_dealt (below);
//  - gemm_bf16_dot (avx512bf16 only): bf16 activations (to_bf16: rounded to nearest even)
//    and bf16 weights, pairs multiplied exactly and summed in f32 by vdpbf16ps.
// attend_rows computes (token, head) rows [r0, r1) of a.tokens * a.heads as
// attention_reference does, with vector dot products; `scores` is one row of a.scratch.
// rms_norm, silu_mul and gelu_tanh_mul are kernels.h's, in vectors (elementwise_kernels.inc).
#define LATHE_DECLARE_ISA_KERNELS                                                             \
  void gemm_rows(const float* x, const float* w, float* y, int64_t m, int64_t n0, int64_t n1, \
                 int64_t ldy, int64_t k, int64_t row_block);                                  \
  void attend_rows(const AttentionArgs& a, int64_t r0, int64_t r1, float* scores);            \
  void rms_norm(const float* x, const float* weight, float offset, float eps, float* y,       \
                int64_t rows, int64_t n);                                                     \
  void silu_mul(const float* gate, const float* up, float* y, int64_t n);                     \
  void gelu_tanh_mul(const float* gate, const float* up, float* y, int64_t n);

namespace portable {
LATHE_DECLARE_RECURRENT_KERNELS
}
namespace avx2 {
LATHE_DECLARE_ISA_KERNELS
LATHE_DECLARE_RECURRENT_KERNELS
void gemm_rows(const float* x, const uint16_t* w, float* y, int64_t m, int64_t n0, int64_t n1,
               int64_t ldy, int64_t k, int64_t row_block);
}  // namespace avx2
namespace avx512 {
LATHE_DECLARE_ISA_KERNELS
LATHE_DECLARE_RECURRENT_KERNELS
// bf16 weights take x dealt: deal_rows writes each row of k floats as steps of kDealStep, a
// step's even elements and then its odd ones, the last step padded with zeros, rows
// dealt_floats(k) apart; gemm_rows_dealt multiplies such rows.
constexpr int64_t kDealStep = 32;
constexpr int64_t dealt_floats(int64_t k) {
  return (k + kDealStep - 1) / kDealStep * kDealStep;
}
void deal_rows(const float* x, float* out, int64_t m, int64_t k);
void gemm_rows_dealt(const float* xd, const uint16_t* w, float* y, int64_t m, int64_t n0,
                     int64_t n1, int64_t ldy, int64_t k, int64_t row_block);
}  // namespace avx512
namespace avx512bf16 {
void gemm_bf16_dot(const uint16_t* x, const uint16_t* w, float* y, int64_t m, int64_t n0,
                   int64_t n1, int64_t ldy, int64_t k, int64_t row_block);
void to_bf16(const float* x, uint16_t* out, int64_t n);
}  // namespace avx512bf16
#undef LATHE_DECLARE_ISA_KERNELS
#undef LATHE_DECLARE_RECURRENT_KERNELS

}  // namespace lathe::cpu
