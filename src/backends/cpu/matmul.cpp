// Matrix multiplication against a weight stored as HF nn.Linear keeps it: [out, in].
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/isa_kernels.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/weight_rows.h"
#include "core/error.h"
#include "core/quant.h"

namespace lathe::cpu {
namespace {

inline float weight_at(const void* w, DType t, int64_t i) {
  return t == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(w)[i])
                          : static_cast<const float*>(w)[i];
}

typedef float f32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline f32x8 load8(const uint16_t* p) {
  u16x8 h;
  std::memcpy(&h, p, sizeof h);
  u32x8 u = __builtin_convertvector(h, u32x8) << 16;
  f32x8 v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
inline float hsum(f32x8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Dot products of up to 2 rows of x with 4 rows of w, 8 lanes at a time, without fused
// multiply-adds: the portable kernel, for CPUs below AVX2 + FMA.
template <class W>
void tile_2x4(const float* x, int64_t rows, const W* w, int64_t wrows, int64_t k, float* out,
              int64_t ldo) {
  f32x8 acc[2][4] = {};
  const int64_t k8 = k / 8 * 8;
  for (int64_t p = 0; p < k8; p += 8) {
    f32x8 wv[4];
    for (int j = 0; j < 4; ++j) wv[j] = j < wrows ? load8(w + j * k + p) : f32x8{};
    for (int i = 0; i < 2; ++i) {
      if (i >= rows) break;
      const f32x8 xv = load8(x + i * k + p);
      for (int j = 0; j < 4; ++j) acc[i][j] += xv * wv[j];
    }
  }
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < wrows; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t p = k8; p < k; ++p) {
        if constexpr (sizeof(W) == 2)
          s += x[i * k + p] * bf16_to_f32(w[j * k + p]);
        else
          s += x[i * k + p] * w[j * k + p];
      }
      out[i * ldo + j] = s;
    }
  }
}

// Rows [n0, n1) of y = x . w^T with the portable kernel.
template <class W>
void gemm_portable(const float* x, const W* w, float* y, int64_t m, int64_t n0, int64_t n1,
                   int64_t ldy, int64_t k) {
  for (int64_t j0 = n0; j0 < n1; j0 += 4) {
    const int64_t wrows = std::min<int64_t>(4, n1 - j0);
    for (int64_t i = 0; i < m; i += 2)
      tile_2x4(x + i * k, std::min<int64_t>(2, m - i), w + j0 * k, wrows, k, y + i * ldy + j0, ldy);
  }
}

// Every part's y = x . w^T (+ bias) with the f32-activation kernel of `isa`, W the weights'
// element type.
template <class W>
void gemm_on(Isa isa, const float* x, std::span<const MatmulPart> parts, int64_t m, int64_t k,
             ThreadPool& pool, MatmulSchedule s) {
  over_parts_rows(m, parts, pool, s.tasks_per_thread, [&](size_t p, int64_t n0, int64_t n1) {
    const auto* w = static_cast<const W*>(parts[p].w);
    float* y = parts[p].y;
    const int64_t n = parts[p].n;
    switch (isa) {
      case Isa::Avx512Bf16:
      case Isa::Avx512:
        if constexpr (std::is_same_v<W, uint16_t>)  // x dealt by the caller
          return avx512::gemm_rows_dealt(x, w, y, m, n0, n1, n, k, s.row_block);
        else
          return avx512::gemm_rows(x, w, y, m, n0, n1, n, k, s.row_block);
      case Isa::Avx2:
        return avx2::gemm_rows(x, w, y, m, n0, n1, n, k, s.row_block);
      case Isa::Portable:
        return gemm_portable(x, w, y, m, n0, n1, n, k);
    }
  });
}

}  // namespace

void matmul_reference(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                      int64_t m, int64_t n, int64_t k, void* scratch) {
  if (is_quantized(w_dtype)) return qmatmul_reference(x, w, w_dtype, bias, y, m, n, k, scratch);
  if (is_block_type(w_dtype)) return block_matmul_reference(x, w, w_dtype, bias, y, m, n, k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += x[i * k + p] * weight_at(w, w_dtype, j * k + p);
      y[i * n + j] = bias ? s + bias[j] : s;
    }
  }
}

size_t matmul_scratch_bytes(DType w_dtype, int64_t m, int64_t k) {
  if (is_quantized(w_dtype)) return qmatmul_scratch_bytes(m, k);
  // bf16 weights: x rounded to bf16 (Avx512Bf16) or dealt (Avx512), which takes more.
  return w_dtype == DType::BF16 ? static_cast<size_t>(m * avx512::dealt_floats(k)) * sizeof(float)
                                : 0;
}

void matmul_fast(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                 int64_t m, int64_t n, int64_t k, void* scratch, ThreadPool& pool,
                 MatmulSchedule s) {
  const MatmulPart part{w, bias, y, n};
  matmul_fast_parts(x, std::span<const MatmulPart>(&part, 1), w_dtype, m, k, scratch, pool, s);
}

void matmul_fast_parts(const float* x, std::span<const MatmulPart> parts, DType w_dtype, int64_t m,
                       int64_t k, void* scratch, ThreadPool& pool, MatmulSchedule s) {
  if (parts.size() > kMaxMatmulParts) fail("internal: a matmul of ", parts.size(), " parts");
  if (is_quantized(w_dtype))
    return qmatmul_fast(x, parts, w_dtype, m, k, scratch, pool, quant_kernel(), s.tasks_per_thread);
  if (is_block_type(w_dtype)) {
    for (const MatmulPart& p : parts)
      block_matmul_fast(x, p.w, w_dtype, p.bias, p.y, m, p.n, k, pool, s.tasks_per_thread,
                        s.row_block);
    return;
  }
  const Isa isa = active_isa();
  if (w_dtype == DType::BF16 && isa == Isa::Avx512Bf16) {
    // Activations rounded to bf16 once per row, then pairs of products in vdpbf16ps.
    auto* xb = static_cast<uint16_t*>(scratch);
    pool.parallel_for(m, 16, [&](int64_t r0, int64_t r1) {
      avx512bf16::to_bf16(x + r0 * k, xb + r0 * k, (r1 - r0) * k);
    });
    return over_parts_rows(
        m, parts, pool, s.tasks_per_thread, [&](size_t p, int64_t n0, int64_t n1) {
          avx512bf16::gemm_bf16_dot(xb, static_cast<const uint16_t*>(parts[p].w), parts[p].y, m, n0,
                                    n1, parts[p].n, k, s.row_block);
        });
  }
  if (w_dtype == DType::BF16) {
    if (isa == Isa::Avx512) {
      // x dealt once into each step's even and odd elements, as the bf16 tiles take them.
      auto* xd = static_cast<float*>(scratch);
      pool.parallel_for(m, 16, [&](int64_t r0, int64_t r1) {
        avx512::deal_rows(x + r0 * k, xd + r0 * avx512::dealt_floats(k), r1 - r0, k);
      });
      x = xd;
    }
    return gemm_on<uint16_t>(isa, x, parts, m, k, pool, s);
  }
  gemm_on<float>(isa, x, parts, m, k, pool, s);
}

}  // namespace lathe::cpu
