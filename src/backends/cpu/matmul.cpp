// Matrix multiplication against a weight stored as HF nn.Linear keeps it: [out, in].
#include <cstring>

#include "backends/cpu/kernels.h"

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

// clang (the fuzz build, LATHE_FUZZ) cannot multiversion templates: it compiles the baseline.
#if defined(__clang__)
#define LATHE_AVX2_CLONES
#else
#define LATHE_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif

// Dot products of up to 2 rows of x with 4 rows of w, 8 lanes at a time. Compiled for AVX2
// and for the baseline ISA; the loader picks one at start-up.
template <class W>
LATHE_AVX2_CLONES void tile_2x4(const float* x, int64_t rows, const W* w, int64_t wrows, int64_t k,
                                float* out, int64_t ldo) {
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

template <class W>
void matmul_tiles(const float* x, const W* w, const float* bias, float* y, int64_t m, int64_t n,
                  int64_t k, ThreadPool& pool) {
  // Split the output features across threads; each thread sweeps all tokens so that a block
  // of weight rows is read from memory once per pair of tokens.
  const int64_t blocks = (n + 3) / 4;
  pool.parallel_for(blocks, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = b * 4;
      const int64_t wrows = std::min<int64_t>(4, n - j0);
      for (int64_t i = 0; i < m; i += 2) {
        const int64_t rows = std::min<int64_t>(2, m - i);
        tile_2x4(x + i * k, rows, w + j0 * k, wrows, k, y + i * n + j0, n);
      }
      if (bias)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < wrows; ++j) y[i * n + j0 + j] += bias[j0 + j];
    }
  });
}

}  // namespace

void matmul_reference(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                      int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += x[i * k + p] * weight_at(w, w_dtype, j * k + p);
      y[i * n + j] = bias ? s + bias[j] : s;
    }
  }
}

void matmul_fast(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                 int64_t m, int64_t n, int64_t k, ThreadPool& pool) {
  if (w_dtype == DType::BF16)
    matmul_tiles(x, static_cast<const uint16_t*>(w), bias, y, m, n, k, pool);
  else
    matmul_tiles(x, static_cast<const float*>(w), bias, y, m, n, k, pool);
}

}  // namespace lathe::cpu
