// CPU kernels. Each op has a portable reference kernel (plain loops, f32 accumulation in a
// fixed order) and, where it pays, a fast kernel that tests check against the reference.
// Kernels trust their arguments: shapes are checked once when graph nodes are built
// (src/graph/builder.cpp), and the CPU backend (backend.cpp) maps nodes onto these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/cpu/isa_kernels.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "graph/graph.h"

namespace lathe::cpu {

// y[m, n] = x[m, k] . w[n, k]^T (+ bias[n]); w is F32, BF16, MXFP4 or FP8 (block_kernels.h) or
// block-quantized (Q8_0, Q4_0: then `scratch` holds matmul_scratch_bytes for the activations'
// quantization, as quant_kernels.h defines the product), x, y and bias are F32.
void matmul_reference(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                      int64_t m, int64_t n, int64_t k, void* scratch = nullptr);
// The fast kernel of cpu::active_isa() (isa.h). With BF16 weights on Avx512Bf16 the
// activations are rounded to bf16 first (into `scratch`, matmul_scratch_bytes big), as
// llama.cpp and torch's bf16 paths do; every other level computes with f32 activations.
size_t matmul_scratch_bytes(DType w_dtype, int64_t m, int64_t k);
// The scratch a matmul of these weights needs from the reference kernel (only quantized
// weights need any) or from the fast one.
inline size_t matmul_scratch_bytes(DType w_dtype, int64_t m, int64_t k, bool reference) {
  return reference && w_dtype != DType::Q8_0 && w_dtype != DType::Q4_0
             ? 0
             : matmul_scratch_bytes(w_dtype, m, k);
}
// How a fast matmul splits and tiles its work: at most tasks_per_thread blocks of weight rows
// per thread, and row_block rows of x over each block of weight rows (f32 and bf16 weights
// only). Every choice gives the same bits; the compiled mode times them per Linear node and
// keeps the fastest (src/compile/module.h). The defaults are the uncompiled path's.
struct MatmulSchedule {
  int tasks_per_thread = ThreadPool::kTasksPerThread;
  int64_t row_block = 96;
};
void matmul_fast(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                 int64_t m, int64_t n, int64_t k, void* scratch, ThreadPool& pool,
                 MatmulSchedule schedule = {});
// One of the matrices a fused matmul multiplies the same x by (a Linear group of the compiled
// mode: q, k and v; gate and up): n weight rows w, the output y [m, n], its bias or null.
struct MatmulPart {
  const void* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t n = 0;
};
// The most parts one fused matmul takes.
constexpr size_t kMaxMatmulParts = 4;
// matmul_fast of x by every part's weights (all of w_dtype, k columns), as one parallel loop
// over all their rows, x converted or quantized once (into `scratch`, as matmul_fast's): each
// part's y has the bits matmul_fast gives it alone. MXFP4 and FP8 parts run one by one.
void matmul_fast_parts(const float* x, std::span<const MatmulPart> parts, DType w_dtype, int64_t m,
                       int64_t k, void* scratch, ThreadPool& pool, MatmulSchedule schedule = {});

// MXFP4 and FP8 weights (block_matmul.cpp; block_kernels.h): f32 activations times the
// exactly dequantized weights, no scratch. The reference equals matmul_reference on the
// dequantized f32 matrix bit for bit; the fast kernel is active_isa()'s (portable: the
// reference, threaded).
bool is_block_type(DType t);
void block_matmul_reference(const float* x, const void* w, DType w_dtype, const float* bias,
                            float* y, int64_t m, int64_t n, int64_t k);
// From 8 rows of x the fast kernel dequantizes each task's weight rows into an f32 panel once
// and runs the f32 kernel on it (row_block as MatmulSchedule's): the f32 kernel's bits on the
// dequantized matrix.
void block_matmul_fast(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                       int64_t m, int64_t n, int64_t k, ThreadPool& pool,
                       int tasks_per_thread = ThreadPool::kTasksPerThread, int64_t row_block = 96);

// Block-quantized weights (quant_matmul.cpp): the fast kernel that serves them, chosen by
// active_isa() and, on AVX-512, the CPU's VNNI (vpdpbusd); AVX-512 without VNNI takes AVX2's.
enum class QuantKernel { Portable, Avx2, Avx512Vnni };
QuantKernel quant_kernel();
const char* quant_kernel_name(QuantKernel k);
size_t qmatmul_scratch_bytes(int64_t m, int64_t k);
void qmatmul_reference(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                       int64_t m, int64_t n, int64_t k, void* scratch);
void qmatmul_fast(const float* x, std::span<const MatmulPart> parts, DType w_dtype, int64_t m,
                  int64_t k, void* scratch, ThreadPool& pool, QuantKernel kernel,
                  int tasks_per_thread = ThreadPool::kTasksPerThread);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * (weight + offset), for `rows` rows of `n`.
void rms_norm(const float* x, const float* weight, float offset, float eps, float* y, int64_t rows,
              int64_t n);

// y = act(x), and y = act(gate) * up, over n elements (y may be x, or gate; not up).
void activation(graph::Activation act, const float* x, float* y, int64_t n);
void act_mul(graph::Activation act, const float* gate, const float* up, float* y, int64_t n);

// The fast forms of active_isa() (isa.h; the portable level runs the reference's): from AVX2
// up, rms_norm sums its squares in vector lanes, and act_mul's SiLU and tanh GELU are
// sigmoids over exp_approx (isa_kernels.inc); within tests/backends/tolerances.h of the
// reference. act_mul_fast's other activations are the reference's.
void rms_norm_fast(const float* x, const float* weight, float offset, float eps, float* y,
                   int64_t rows, int64_t n);
void act_mul_fast(graph::Activation act, const float* gate, const float* up, float* y, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu_tanh(gate[i]) * up[i]; gelu_tanh as torch gelu(approximate="tanh").
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu_tanh(x[i]), and the exact (erf) GELU, torch gelu(approximate="none").
void gelu_tanh(const float* x, float* out, int64_t n);
void gelu_erf(const float* x, float* out, int64_t n);
// In place: x[i] = cap * tanh(x[i] / cap)   (Gemma2 logit soft-capping).
void softcap(float* x, int64_t n, float cap);

// torch LayerNorm over rows of n: (x - mean) / sqrt(biased var + eps) * weight + bias, where
// weight and bias (each may be null) hold `groups` rows of n that row r takes in turn
// (r % groups): 1 for one shared norm, heads for per-head norms.
void layer_norm(const float* x, const float* weight, const float* bias, int64_t groups, float eps,
                float* y, int64_t rows, int64_t n);
// xIELU with formed coefficients (see graph::Builder::xielu).
void xielu(const float* x, float* out, int64_t n, float alpha_p, float alpha_n, float beta,
           float eps);

// Rotary embedding in place on x[tokens, heads, head_dim], half-split layout (HF
// rotate_half): pairs (i, i + rot/2) for i < rot/2, where rot = rotary dims <= head_dim.
// cos/sin are [tokens, rot/2].
// The interleaved layout (GLM / Ernie rotate_half): pairs (2i, 2i + 1) for i < rot/2.
void rope_interleaved(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads,
                      int64_t head_dim, int64_t rot);
void rope_half_split(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads,
                     int64_t head_dim, int64_t rot);

// Causal attention (AttentionArgs: isa_kernels.h).
// The scratch rows of attention for one thread: `heads` heads of head_floats each, for scores
// of score_floats and values of v_dim; as many heads as fit in 4 MiB, at least one and at
// most the query's.
struct AttentionScratch {
  int64_t heads, head_floats;
  int64_t floats() const { return heads * head_floats; }
};
AttentionScratch attention_scratch(int64_t heads, int64_t score_floats, int64_t v_dim);
void attention_reference(const AttentionArgs& a);
void attention_fast(const AttentionArgs& a, ThreadPool& pool);

}  // namespace lathe::cpu
