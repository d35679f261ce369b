// Matrix multiplication against block-quantized weights (core/quant.h; quant_kernels.h says
// what is computed): the activations' quantization, the reference kernel, and the choice of
// fast kernel by the CPU's features.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_kernels.h"
#include "backends/cpu/weight_rows.h"
#include "core/error.h"
#include "core/quant.h"

namespace lathe::cpu {
namespace {

size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

// The scratch of m rows: codes, then lane scales, lane starts and block starts, each 64-byte
// aligned.
QuantActs carve(void* scratch, int64_t m, int64_t k) {
  auto* base = static_cast<uint8_t*>(scratch);
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  const size_t codes = align64(static_cast<size_t>(m * k));
  const size_t lanes = align64(static_cast<size_t>(m * (k / 4)) * 4);
  return {reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + codes),
          reinterpret_cast<int32_t*>(base + codes + lanes),
          reinterpret_cast<int32_t*>(base + codes + 2 * lanes), k};
}

// The code of value t of a group's codes.
inline int code_at(bool q4, const uint8_t* codes, int64_t t) {
  if (!q4) return codes[t];
  return t < 32 ? codes[t] & 0x0f : codes[t - 32] >> 4;
}

// Rows [n0, n1) of y = x . w^T as quant_kernels.h defines it, one block at a time.
void qgemm_reference(bool q4, const QuantActs& x, const uint8_t* w, size_t ldw, float* y, int64_t m,
                     int64_t n0, int64_t n1, int64_t ldy) {
  const int zp = q4 ? 8 : 128;
  const size_t group = q4 ? 36 : 68;
  const int64_t k = x.k;
  for (int64_t i = 0; i < m; ++i) {
    const int8_t* xq = x.q + i * k;
    const float* xd = x.d + i * (k / 4);
    for (int64_t j = n0; j < n1; ++j) {
      const uint8_t* row = w + static_cast<size_t>(j) * ldw;
      float s = 0.0f;
      for (int64_t g = 0; g < k / kQuantGroup; ++g) {
        const uint8_t* grp = row + static_cast<size_t>(g) * group;
        uint16_t d16[2];
        std::memcpy(d16, grp, 4);
        for (int h = 0; h < 2; ++h) {
          const int64_t b = 2 * g + h;
          int32_t isum = 0;
          for (int64_t t = 0; t < kQuantBlock; ++t)
            isum += (code_at(q4, grp + 4, h * 32 + t) - zp) * xq[b * kQuantBlock + t];
          s += (f16_to_f32(d16[h]) * xd[b * 8]) * static_cast<float>(isum);
        }
      }
      y[i * ldy + j] = s;
    }
  }
}

}  // namespace

void quantize_acts_reference(const QuantActs& a, int zero_point, const float* x, int64_t r0,
                             int64_t r1) {
  const int64_t k = a.k;
  for (int64_t r = r0; r < r1; ++r) {
    int8_t* q = a.q + r * k;
    float* d = a.d + r * (k / 4);
    int32_t* init = a.init + r * (k / 4);
    const float* xr = x + r * k;
    for (int64_t b = 0; b < k / kQuantBlock; ++b) {
      const float* xb = xr + b * kQuantBlock;
      float amax = 0;
      for (int64_t t = 0; t < kQuantBlock; ++t) amax = std::max(amax, std::fabs(xb[t]));
      const float dx = amax / 127.0f;
      float id = 1.0f / dx;
      if (!std::isfinite(id)) id = 0.0f;  // dx 0 or too small to invert: zero codes
      for (int64_t t = 0; t < kQuantBlock; ++t)
        q[b * kQuantBlock + t] =
            static_cast<int8_t>(std::clamp(std::nearbyint(xb[t] * id), -127.0f, 127.0f));
      int32_t block = 0;
      for (int64_t l = 0; l < kQuantBlock / 4; ++l) {
        const int8_t* ql = q + b * kQuantBlock + l * 4;
        d[b * 8 + l] = dx;
        init[b * 8 + l] = -zero_point * (ql[0] + ql[1] + ql[2] + ql[3]);
        block += init[b * 8 + l];
      }
      a.block_init[r * (k / kQuantBlock) + b] = block;
    }
  }
}

size_t qmatmul_scratch_bytes(int64_t m, int64_t k) {
  return 64 + align64(static_cast<size_t>(m * k)) +
         2 * align64(static_cast<size_t>(m * (k / 4)) * 4) +
         align64(static_cast<size_t>(m * (k / kQuantBlock)) * 4);
}

QuantKernel quant_kernel() {
  const Isa isa = active_isa();
  if (isa == Isa::Avx512 || isa == Isa::Avx512Bf16) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512vnni")) return QuantKernel::Avx512Vnni;
#endif
    return QuantKernel::Avx2;
  }
  return isa == Isa::Avx2 ? QuantKernel::Avx2 : QuantKernel::Portable;
}

const char* quant_kernel_name(QuantKernel k) {
  switch (k) {
    case QuantKernel::Portable:
      return "portable";
    case QuantKernel::Avx2:
      return "avx2";
    case QuantKernel::Avx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

void qmatmul_reference(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                       int64_t m, int64_t n, int64_t k, void* scratch) {
  if (!scratch) fail("internal: a quantized matmul without scratch");
  const QuantActs a = carve(scratch, m, k);
  quantize_acts_reference(a, quant_zero_point(w_dtype), x, 0, m);
  qgemm_reference(w_dtype == DType::Q4_0, a, static_cast<const uint8_t*>(w), row_bytes(w_dtype, k),
                  y, m, 0, n, n);
  add_bias(bias, y, m, 0, n, n);
}

void qmatmul_fast(const float* x, std::span<const MatmulPart> parts, DType w_dtype, int64_t m,
                  int64_t k, void* scratch, ThreadPool& pool, QuantKernel kernel,
                  int tasks_per_thread) {
  const QuantActs a = carve(scratch, m, k);
  const int zp = quant_zero_point(w_dtype);
  pool.parallel_for(m, 4, [&](int64_t r0, int64_t r1) {
    switch (kernel) {
      case QuantKernel::Avx512Vnni:
        return avx512vnni::quantize_acts(a, zp, x, r0, r1);
      case QuantKernel::Avx2:
        return avx2::quantize_acts(a, zp, x, r0, r1);
      case QuantKernel::Portable:
        return quantize_acts_reference(a, zp, x, r0, r1);
    }
  });
  const bool q4 = w_dtype == DType::Q4_0;
  const size_t ldw = row_bytes(w_dtype, k);
  over_parts_rows(m, parts, pool, tasks_per_thread, [&](size_t p, int64_t n0, int64_t n1) {
    const auto* wq = static_cast<const uint8_t*>(parts[p].w);
    float* y = parts[p].y;
    const int64_t n = parts[p].n;
    switch (kernel) {
      case QuantKernel::Avx512Vnni:
        return avx512vnni::qgemm_rows(q4, a, wq, ldw, y, m, n0, n1, n);
      case QuantKernel::Avx2:
        return avx2::qgemm_rows(q4, a, wq, ldw, y, m, n0, n1, n);
      case QuantKernel::Portable:
        return qgemm_reference(q4, a, wq, ldw, y, m, n0, n1, n);
    }
  });
}

}  // namespace lathe::cpu
